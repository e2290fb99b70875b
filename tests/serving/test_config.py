"""``load_config``: conf/base/serving.yml, a named file and the environment, merged key by key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from ragfolio.serving.config import load_config, merge

BASE = {"serving": {
    "member_timeout_s": 10.0,
    "batching": {"max_batch_size": 32, "max_wait_ms": 2},
    "llm": {"kind": "openai", "openai": {"base_url": "http://127.0.0.1:8080/v1", "model": "m", "max_retries": 3}},
}}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "conf" / "base").mkdir(parents=True)
    (tmp_path / "conf" / "base" / "serving.yml").write_text(yaml.safe_dump(BASE))
    return tmp_path


def test_merge_lays_mappings_over_each_other_and_replaces_the_rest() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert merge(base, {"a": {"c": [3]}, "e": None}) == {"a": {"b": 1, "c": [3]}, "d": 1, "e": None}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}


def test_a_named_file_changes_only_what_it_names(project: Path) -> None:
    (project / "mine.yml").write_text(yaml.safe_dump({"serving": {"llm": {"openai": {"max_retries": 1}}}}))
    config = load_config(env={"RAGFOLIO_SERVING_CONFIG": "mine.yml"}, root=project)
    assert config.llm["openai"] == {"base_url": "http://127.0.0.1:8080/v1", "model": "m", "max_retries": 1}
    assert config.member_timeout_s == 10.0 and config.batching.max_batch_size == 32


def test_nested_settings_come_from_the_environment(project: Path) -> None:
    env = {"RAGFOLIO_LLM__OPENAI__BASE_URL": "http://10.0.0.1:9000/v1", "RAGFOLIO_LLM__OPENAI__MAX_RETRIES": "0",
           "RAGFOLIO_BATCHING__MAX_WAIT_MS": "5.5", "RAGFOLIO_MEMBER_TIMEOUT_S": "2", "RAGFOLIO_WARM_UP": "false",
           "RAGFOLIO_MODEL_CACHE": "/somewhere", "RAGFOLIO_DEFAULT_L": "null"}
    config = load_config(env=env, root=project)
    assert config.llm["openai"]["base_url"] == "http://10.0.0.1:9000/v1"
    assert config.llm["openai"]["max_retries"] == 0 and config.llm["openai"]["model"] == "m"
    assert config.batching.max_wait_ms == 5.5 and config.batching.max_batch_size == 32
    assert config.member_timeout_s == 2.0 and config.warm_up is False and config.default_l is None


def test_the_environment_wins_over_the_named_file(project: Path) -> None:
    (project / "mine.yml").write_text(yaml.safe_dump({"serving": {"member_timeout_s": 3}}))
    env = {"RAGFOLIO_SERVING_CONFIG": "mine.yml", "RAGFOLIO_MEMBER_TIMEOUT_S": "4"}
    assert load_config(env=env, root=project).member_timeout_s == 4.0


def test_a_misspelt_nested_key_is_refused_by_name(project: Path) -> None:
    with pytest.raises(ValidationError, match="max_wait"):
        load_config(env={"RAGFOLIO_BATCHING__MAX_WAIT": "5"}, root=project)


def test_a_key_below_a_single_value_is_refused(project: Path) -> None:
    with pytest.raises(ValueError, match="RAGFOLIO_MEMBER_TIMEOUT_S__X: 'member_timeout_s' is a single value"):
        load_config(env={"RAGFOLIO_MEMBER_TIMEOUT_S__X": "1"}, root=project)


def test_a_missing_named_file_is_an_error(project: Path) -> None:
    with pytest.raises(FileNotFoundError, match="RAGFOLIO_SERVING_CONFIG"):
        load_config(env={"RAGFOLIO_SERVING_CONFIG": "nowhere.yml"}, root=project)
