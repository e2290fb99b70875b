"""The credentials hook: Kedro's ``elasticsearch`` credentials reach the core as environment variables."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from kedro.config import MissingConfigException

from ragfolio.core.retrieval.indexes.elasticsearch_settings import ElasticsearchSettings
from ragfolio.hooks import CredentialsHook, export_credentials


def test_credentials_are_exported_where_unset_and_read_by_the_core() -> None:
    environ = {"ELASTICSEARCH_USERNAME": "from-env"}
    section = {"url": "https://es.example.org:9200", "username": "elastic", "password": "s3cret", "max_retries": 5}
    exported = export_credentials(section, environ)
    assert sorted(exported) == ["ELASTICSEARCH_MAX_RETRIES", "ELASTICSEARCH_PASSWORD", "ELASTICSEARCH_URL"]
    settings = ElasticsearchSettings.resolve(environ=environ)
    assert (settings.url, settings.username, settings.password, settings.max_retries) == (
        "https://es.example.org:9200", "from-env", "s3cret", 5,
    )


def test_an_unknown_credentials_key_is_named() -> None:
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['hots'\]"):
        export_credentials({"hots": "x"}, {})


def test_the_hook_exports_from_the_config_loader_and_tolerates_no_credentials(monkeypatch) -> None:
    monkeypatch.delenv("ELASTICSEARCH_URL", raising=False)
    hook = CredentialsHook()
    hook.after_context_created(SimpleNamespace(config_loader={"credentials": {"elasticsearch": {"url": "http://h:9200"}}}))
    assert __import__("os").environ["ELASTICSEARCH_URL"] == "http://h:9200"

    class NoCredentials(dict):
        def __getitem__(self, key: str) -> object:
            raise MissingConfigException("no credentials")

    hook.after_context_created(SimpleNamespace(config_loader=NoCredentials()))  # nothing to export, no error
