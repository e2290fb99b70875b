"""Named runs: where outputs go, and a run on other data that would overwrite the sample's is stopped."""

from __future__ import annotations

from pathlib import Path

import pytest
from kedro.config import OmegaConfigLoader

from ragfolio.runs import RunIdentity, RunNameError, check_not_clobbering, identity_record, run_name, run_root
from ragfolio.settings import CONFIG_LOADER_ARGS

ROOT = Path(__file__).resolve().parents[1]


def test_the_sample_writes_data_and_a_named_run_its_own_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGFOLIO_RUN_NAME", raising=False)
    assert run_root(None) == run_root("") == run_root("sample") == "data"
    assert run_root("teamwiki") == "runs/teamwiki"
    monkeypatch.setenv("RAGFOLIO_RUN_NAME", "from-env")
    assert run_root(None) == "runs/from-env" and run_name({}) == "from-env"
    assert run_name({"run_name": "param-wins"}) == "param-wins"


@pytest.mark.parametrize("name", ["../up", "a/b", ".hidden", "x" * 65, "sp ace"])
def test_a_name_that_cannot_name_a_folder_is_refused(name: str) -> None:
    with pytest.raises(RunNameError, match="run_name="):
        run_root(name)


def test_every_catalog_path_follows_the_run_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGFOLIO_RUN_NAME", raising=False)

    def paths(runtime_params: dict[str, str] | None) -> list[str]:
        loader = OmegaConfigLoader(str(ROOT / "conf"), runtime_params=runtime_params, **CONFIG_LOADER_ARGS)
        return [entry.get("filepath") or entry["path"] for name, entry in loader["catalog"].items()
                if not name.startswith("_") and ("filepath" in entry or "path" in entry)]

    assert paths(None) and all(p.startswith("data/") for p in paths(None))
    assert all(p.startswith("runs/teamwiki/") for p in paths({"run_name": "teamwiki"}))
    assert all(p.startswith("/mnt/v/") for p in paths({"run_name": "teamwiki", "data_root": "/mnt/v"}))


def test_a_run_on_other_data_needs_a_name_a_root_or_consent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGFOLIO_RUN_NAME", raising=False)
    check_not_clobbering({"data_prep": {"raw_dir": "data/01_raw"}})  # the sample itself
    check_not_clobbering({"data_prep": {"raw_dir": "./data/01_raw/"}})
    mine = {"data_prep": {"raw_dir": "/srv/teamwiki"}}
    with pytest.raises(RunNameError, match=r"raw_dir=/srv/teamwiki is not the bundled sample.*run_name=NAME"):
        check_not_clobbering(mine)
    with pytest.raises(RunNameError):
        check_not_clobbering({"data_prep": {"raw_dir": "data/01_raw", "test_dir": "/srv/test"}})
    check_not_clobbering({**mine, "run_name": "teamwiki"})
    check_not_clobbering({**mine, "data_root": "/mnt/v"})
    check_not_clobbering({**mine, "overwrite_sample": True})


def test_a_run_is_named_after_its_own_name_else_the_data_folder_it_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAGFOLIO_RUN_NAME", raising=False)
    params = {"data_prep": {"raw_dir": "data/01_raw"}, "portfolio_selection": {"k": 5}, "candidate_scoring": {"grid": "default"}}
    assert RunIdentity.of(params, {}).title("portfolio") == "sample/portfolio k=5 pool=default"
    other = {**params, "data_prep": {"raw_dir": "/srv/Team Wiki/"}, "overwrite_sample": True}
    assert RunIdentity.of(other, {}).label == "Team-Wiki"
    assert RunIdentity.of({**other, "run_name": "teamwiki"}, {}).label == "teamwiki"
    inline = {**params, "candidate_scoring": {"grid": {"bm25": {"k1": [1.2]}}}}
    assert RunIdentity.of(inline, {}).pool == "inline"
    assert RunIdentity.of({**params, "portfolio_selection": {"k": 5.0}}, {}).k == 5  # as a KFP step passes it


def test_a_stage_takes_what_it_does_not_read_from_the_record_of_the_stage_that_did() -> None:
    defaults = {"data_prep": {"raw_dir": "data/01_raw"}, "portfolio_selection": {"k": 5}}
    prep = identity_record({**defaults, "data_prep": {"raw_dir": "/mnt/q40"}}, {"data_prep"}, {})
    assert prep == {"raw_dir": "/mnt/q40", "test_dir": None, "corpus_dir": None}
    later = identity_record(defaults, {"router_training"}, prep)
    assert later == prep and RunIdentity.of(defaults, later).label == "q40"
    assert RunIdentity.of(defaults, later).k == 5  # never recorded: the parameters'
    again = identity_record(defaults, {"data_prep"}, later)  # data_prep rerun on the sample
    assert RunIdentity.of(defaults, again).label == "sample"
