"""Where an Elasticsearch cluster is and how to talk to it: settings, their sources, and errors.

Core reads no configuration file: settings come from explicit parameters, the ``ELASTICSEARCH_*``
environment variables and a ``credentials`` mapping its caller passes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

RETRY_STATUSES = (429, 502, 503, 504)  # transient: overloaded, or a proxy in front of a restarting node
INSTALL_HINT = 'the Elasticsearch backend needs the official client: pip install "elasticsearch>=8.13"'


class ElasticsearchUnavailableError(ConnectionError):
    """The cluster could not be reached, or kept answering 429/50x, after the client's retries."""


class ElasticsearchIndexMissingError(LookupError):
    """The index a retriever reads does not exist."""

    def __init__(self, index: str) -> None:
        super().__init__(
            f"Elasticsearch index {index!r} does not exist; build it with index() on the same corpus and "
            "parameters (running candidate_scoring with a backend: elasticsearch candidate does this)"
        )
        self.index = index


class ElasticsearchRequestError(RuntimeError):
    """A search or bulk item the cluster rejected for a reason retrying cannot fix."""


@dataclass(frozen=True)
class ElasticsearchSettings:
    """Where the cluster is and how to talk to it.

    Args:
        url: ``http(s)://host:port`` of a node.
        api_key: An encoded API key (exclusive with ``username``/``password``).
        username: Basic-auth user (with ``password``).
        password: Basic-auth password.
        index_prefix: First part of every index name ragfolio creates (lower case).
        request_timeout: Seconds per HTTP request.
        max_retries: Retries of a request on connection errors, timeouts and 429/502/503/504.
        retry_backoff: Base of the exponential backoff between retries, in seconds (0: none).
        verify_certs: Check the server's TLS certificate.
        ca_certs: A CA bundle for a self-signed cluster.
        bulk_chunk_size: Documents per ``_bulk`` request.
        msearch_batch_size: Queries per ``_msearch`` request.
    """

    url: str
    api_key: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    index_prefix: str = "ragfolio"
    request_timeout: float = 30.0
    max_retries: int = 3
    retry_backoff: float = 0.5
    verify_certs: bool = True
    ca_certs: str | None = None
    bulk_chunk_size: int = 500
    msearch_batch_size: int = 100

    def __post_init__(self) -> None:
        if not re.match(r"^https?://[^/\s]+", self.url):
            raise ValueError(f"url={self.url!r} must look like http://host:9200 or https://host:9200")
        if (self.username is None) != (self.password is None):
            raise ValueError("username and password must be given together")
        if self.api_key and self.username:
            raise ValueError("give either api_key or username/password, not both")
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*", self.index_prefix):
            raise ValueError(f"index_prefix={self.index_prefix!r} must be lower-case letters, digits, '-' or '_'")
        for name in ("max_retries", "bulk_chunk_size", "msearch_batch_size"):
            if getattr(self, name) < (0 if name == "max_retries" else 1):
                raise ValueError(f"{name}={getattr(self, name)} is out of range")

    @classmethod
    def resolve(
        cls,
        params: Mapping[str, Any] | None = None,
        *,
        credentials: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> ElasticsearchSettings:
        """Settings from ``params``, then environment variables, then ``credentials``.

        Each key takes the first source that sets it: ``params`` (e.g. PoolRunner's ``elasticsearch``
        argument), the variable ``ELASTICSEARCH_<KEY>`` (``ELASTICSEARCH_URL``, ``_API_KEY``,
        ``_USERNAME``, ``_PASSWORD``, ``_INDEX_PREFIX``, ...), then ``credentials``, a mapping the
        caller read from wherever it keeps secrets (a Kedro run exports the ``elasticsearch:`` section
        of ``conf/local/credentials.yml`` into those variables; see :mod:`ragfolio.hooks`).
        """
        environ = os.environ if environ is None else environ
        known = {f.name: f for f in fields(cls)}
        merged: dict[str, Any] = dict(credentials or {})
        merged.update({key: _from_env(environ[var], known[key].type) for key, var in ENV_VARS.items() if environ.get(var)})
        merged.update({key: value for key, value in (params or {}).items() if value is not None})
        unknown = sorted(set(merged) - set(known))
        if unknown:
            raise ValueError(f"unknown Elasticsearch setting(s) {unknown}; known: {sorted(known)}")
        if not merged.get("url"):
            raise ValueError(
                "no Elasticsearch URL: export ELASTICSEARCH_URL=http://host:9200, or set elasticsearch.url "
                "in conf/local/credentials.yml"
            )
        return cls(**merged)

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments of ``elasticsearch.Elasticsearch`` (retries are the client's own)."""
        options: dict[str, Any] = {
            "hosts": [self.url], "request_timeout": self.request_timeout, "max_retries": self.max_retries,
            "retry_on_timeout": True, "retry_on_status": RETRY_STATUSES, "verify_certs": self.verify_certs,
        }
        if self.retry_backoff > 0:  # exponential backoff with jitter, capped at 32 x the base
            options.update(retry_backoff_base=self.retry_backoff, retry_backoff_cap=32 * self.retry_backoff)
        if self.ca_certs:
            options["ca_certs"] = self.ca_certs
        if self.api_key:
            options["api_key"] = self.api_key
        elif self.username is not None:
            options["basic_auth"] = (self.username, self.password)
        return options

    def connect(self, **overrides: Any) -> Any:
        """A new ``elasticsearch.Elasticsearch`` client (no request is sent until it is used)."""
        try:
            from elasticsearch import Elasticsearch
        except ImportError as err:
            raise ImportError(INSTALL_HINT) from err
        return Elasticsearch(**{**self.client_options(), **overrides})




ENV_VARS = {f.name: f"ELASTICSEARCH_{f.name.upper()}" for f in fields(ElasticsearchSettings)}


def _from_env(value: str, annotation: Any) -> Any:
    """An environment variable's text as the setting's type (annotations are strings here)."""
    kind = str(annotation)
    if kind.startswith("bool"):
        if value.lower() not in {"1", "0", "true", "false", "yes", "no"}:
            raise ValueError(f"{value!r} is not a boolean (true/false)")
        return value.lower() in {"1", "true", "yes"}
    if kind.startswith("int"):
        return int(value)
    if kind.startswith("float"):
        return float(value)
    return value
