"""One Elasticsearch index as both retrievers use it: build or attach it, search it, write to it.

:class:`ClusterIndex` holds the settings, a lazily made client and the index's name. Building is
idempotent: an index that already holds every base row (``row < n``) is used as it is, so documents a
living corpus added later (rows ``n`` and up) do not make it look incomplete. Writes of live updates
(:meth:`ClusterIndex._write`) go through the bulk API with ``refresh="wait_for"``: the call returns once
the next search sees them, without forcing a refresh of its own (which would write a small segment per
update); that is at most the index's ``refresh_interval`` later (1 s by default), and an idle shard
refreshes at once for a waiting write. Client errors become ragfolio's
(:func:`translated_errors`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from ragfolio.core.retrieval.indexes.elasticsearch_documents import is_absent, passage_mapping
from ragfolio.core.retrieval.indexes.elasticsearch_requests import msearch_lines, parse_msearch
from ragfolio.core.retrieval.indexes.elasticsearch_settings import (
    RETRY_STATUSES,
    ElasticsearchIndexMissingError,
    ElasticsearchRequestError,
    ElasticsearchSettings,
    ElasticsearchUnavailableError,
)
from ragfolio.core.retrieval.results import RetrievalResult

logger = logging.getLogger(__name__)

@contextmanager
def translated_errors(settings: ElasticsearchSettings, index: str) -> Iterator[None]:
    """Turn the client's transport and API errors into ragfolio's, naming the URL or the index."""
    import elastic_transport
    from elasticsearch import ApiError, AuthenticationException, AuthorizationException, NotFoundError

    try:
        yield
    except (elastic_transport.ConnectionError, elastic_transport.ConnectionTimeout) as err:
        raise ElasticsearchUnavailableError(
            f"cannot reach Elasticsearch at {settings.url} after {settings.max_retries} retries ({err}); "
            "is it running, and is ELASTICSEARCH_URL right?"
        ) from err
    except NotFoundError as err:
        if "index_not_found_exception" in str(err.body):
            raise ElasticsearchIndexMissingError(index) from err
        raise
    except (AuthenticationException, AuthorizationException) as err:
        raise PermissionError(
            f"Elasticsearch at {settings.url} refused the credentials ({err.meta.status}); set "
            "ELASTICSEARCH_API_KEY or ELASTICSEARCH_USERNAME/ELASTICSEARCH_PASSWORD"
        ) from err
    except ApiError as err:
        if err.meta.status in RETRY_STATUSES:
            raise ElasticsearchUnavailableError(
                f"Elasticsearch at {settings.url} still answered {err.meta.status} after "
                f"{settings.max_retries} retries: {err}"
            ) from err
        raise


@dataclass
class ClusterIndex:
    """What both retrievers share: the settings, a lazily made client and one index.

    Attributes:
        index_name_: The index, once :meth:`_build` or :meth:`_attach` has run.
        n_docs_: The rows :meth:`_build` loaded (``0..n_docs_-1``; live updates may add rows beyond), or
            the documents :meth:`_attach` found.
        passages_key_: The digest of the passages' ids, titles and metadata in the index name, or None.
    """

    settings: ElasticsearchSettings
    client: Any = field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        self.index_name_: str | None = None
        self.n_docs_ = 0
        self.passages_key_: str | None = None
        self._fields_mapped = False  # whether this index is known to map passage_id, title and metadata

    def _client(self) -> Any:
        if self.client is None:
            self.client = self.settings.connect()
        return self.client

    def _build(self, name: str, body: Mapping[str, Any], actions: Iterator[dict[str, Any]], n_docs: int) -> None:
        """Create index ``name`` if needed and bulk-load it, unless it already holds rows ``0..n_docs-1``."""
        from elasticsearch import BadRequestError, helpers

        client = self._client()
        self._fields_mapped = False
        with translated_errors(self.settings, name):
            if client.indices.exists(index=name) and self._base_count(name, n_docs) == n_docs:
                logger.info("Elasticsearch index %s already holds the %d passages", name, n_docs)
            else:
                try:
                    client.indices.create(index=name, **body)
                    self._fields_mapped = True
                except BadRequestError as err:  # created meanwhile by another process: fine
                    if "resource_already_exists_exception" not in str(err.body):
                        raise
                stream = helpers.streaming_bulk(
                    client, actions, chunk_size=self.settings.bulk_chunk_size, max_retries=self.settings.max_retries,
                    initial_backoff=max(self.settings.retry_backoff, 0.01), raise_on_error=False,
                )
                failed = []
                for ok, item in tqdm(stream, total=n_docs, desc=f"indexing {name}", unit="doc", disable=n_docs < 1000):
                    if not ok:
                        failed.append(item)
                if failed:
                    raise ElasticsearchRequestError(
                        f"{len(failed)} document(s) failed to index into {name!r}, the first: {failed[0]}"
                    )
                client.indices.refresh(index=name)
            count = self._base_count(name, n_docs)
        if count != n_docs:
            raise ElasticsearchRequestError(f"index {name!r} holds {count} of the rows 0..{n_docs - 1}")
        self.index_name_, self.n_docs_ = name, n_docs

    def _base_count(self, name: str, n_docs: int) -> int:
        """How many of the rows ``0..n_docs-1`` index ``name`` holds (rows added live are not counted)."""
        return int(self._client().count(index=name, query={"range": {"row": {"lt": n_docs}}})["count"])

    def _attach(self, name: str) -> None:
        self._fields_mapped = False
        with translated_errors(self.settings, name):
            client = self._client()
            if not client.indices.exists(index=name):
                raise ElasticsearchIndexMissingError(name)
            self.index_name_, self.n_docs_ = name, int(client.count(index=name)["count"])

    def _write(self, actions: Iterable[dict[str, Any]], what: str) -> None:
        """Send bulk ``actions`` (``index`` or ``delete``) and return once a search sees them.

        The first write of an index this object did not create adds the passage fields to its mapping
        (an additive put-mapping, a no-op where they are there), so an index built before they existed
        takes documents that carry them. Deleting a row without a document is no error.

        Raises:
            RuntimeError: No index yet.
            ElasticsearchRequestError: Items the cluster refused (the first one quoted).
        """
        from elasticsearch import helpers

        name, actions = self._require_index(), list(actions)
        if not actions:
            return
        client = self._client()
        with translated_errors(self.settings, name):
            if not self._fields_mapped:
                client.indices.put_mapping(index=name, **passage_mapping())
                self._fields_mapped = True
            stream = helpers.streaming_bulk(
                client, actions, chunk_size=self.settings.bulk_chunk_size, max_retries=self.settings.max_retries,
                initial_backoff=max(self.settings.retry_backoff, 0.01), raise_on_error=False, refresh="wait_for",
            )
            failed = [item for ok, item in stream if not ok and not is_absent(item)]
        if failed:
            raise ElasticsearchRequestError(f"{len(failed)} {what} action(s) failed on {name!r}, the first: {failed[0]}")

    def _require_index(self) -> str:
        if self.index_name_ is None:
            raise RuntimeError("call index() or attach() first")
        return self.index_name_

    def _search(self, searches: list[dict[str, Any]], k: int, score: Callable[[float], float]) -> RetrievalResult:
        """Run ``searches`` in ``_msearch`` batches; items the cluster rejected as overloaded are retried."""
        name, batch = self._require_index(), self.settings.msearch_batch_size
        answers: list[Mapping[str, Any]] = [{}] * len(searches)
        starts = range(0, len(searches), batch)
        for start in tqdm(starts, desc=f"searching {name}", unit="batch", disable=len(starts) < 10):
            pending = list(range(start, min(start + batch, len(searches))))
            for attempt in range(self.settings.max_retries + 1):
                with translated_errors(self.settings, name):
                    reply = self._client().msearch(searches=msearch_lines(name, [searches[i] for i in pending]))
                retry = []
                for i, item in zip(pending, reply["responses"], strict=True):
                    if item.get("status") in RETRY_STATUSES and attempt < self.settings.max_retries:
                        retry.append(i)
                    else:
                        answers[i] = item
                if not retry:
                    break
                time.sleep(self.settings.retry_backoff * 2**attempt)
                pending = retry
        return parse_msearch({"responses": answers}, k, name, score)


