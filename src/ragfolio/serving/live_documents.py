"""Documents added, replaced and deleted while the service runs: ``POST /documents``, ``GET`` and
``DELETE /documents/{id}``, and what ``/portfolio`` says of them.

:class:`LiveDocuments` is the engine's side, in plain Python: it checks a request against the
settings (:class:`~ragfolio.serving.config.LiveUpdatesConfig`), applies it to the living corpus
(:class:`~ragfolio.core.corpus.live_corpus.LiveCorpus`: encoded, written ahead to the bundle's
update log, then searchable by the next query) and logs what it did, warning once the delta passes
``stale_share`` of the corpus the portfolio was chosen on. :class:`DocumentsAPI` is the HTTP side:
each update runs in one thread of its own (updates apply one at a time, and never hold up a
retrieval thread) and its failures become a 4xx naming the cause (a document's field, an unknown
id) or a 500 that names nothing internal. The routes are key-protected like every other
(:mod:`ragfolio.serving.access`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pydantic import ValidationError
from starlette.responses import JSONResponse

from ragfolio.core.corpus.live_corpus import Applied, LiveCorpus
from ragfolio.core.retrieval.family import families
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.serving.config import LiveUpdatesConfig
from ragfolio.serving.guard import INTERNAL_ERROR, current_request_id
from ragfolio.serving.schemas import DocumentsRequest, DocumentsResponse

logger = logging.getLogger(__name__)


class LiveDocuments:
    """The living corpus's updates and status as the service offers them (see the module docstring).

    Args:
        corpus: The served corpus as it lives.
        config: The ``live_updates`` settings.
        members: The bundle's members (``/portfolio`` names those that rank added passages only
            after the next run).
        warm: Builds what queries read of the corpus's new version, before an update is answered.
    """

    def __init__(self, corpus: LiveCorpus, config: LiveUpdatesConfig, members: Sequence[CandidateSpec],
                 warm: Callable[[], None] = lambda: None) -> None:
        self.corpus, self.config, self.members, self.warm = corpus, config, list(members), warm

    def add(self, records: Sequence[Any]) -> DocumentsResponse:
        """Add or replace passages by id, all or none, logged before they are applied.

        Raises:
            PermissionError: Live updates are off.
            ValueError: Too many documents, or one is malformed
                (:class:`~ragfolio.core.corpus.live_corpus.DocumentError`, naming its field).
        """
        self._check()
        if len(records) > self.config.max_documents:
            raise ValueError(f"documents: {len(records)} documents; the limit is "
                             f"live_updates.max_documents={self.config.max_documents}")
        return self._done(self.corpus.upsert(records))

    def delete(self, pid: str) -> DocumentsResponse:
        """Delete passage ``pid``. Raises KeyError when no live passage has that id."""
        self._check()
        return self._done(self.corpus.delete([pid]))

    def get(self, pid: str) -> dict[str, Any] | None:
        """The live passage ``pid`` (``{"id", "title", "text", "metadata"}``), or None."""
        snapshot = self.corpus.snapshot()
        if (row := snapshot.row_of(pid)) is None:
            return None
        found, title, text, metadata = snapshot.passage(row)
        return {"id": found, "title": title, "text": text, "metadata": None if metadata is None else dict(metadata)}

    def _check(self) -> None:
        if not self.config.enabled:
            raise PermissionError("live updates are off (serving setting live_updates.enabled)")

    def warn_if_stale(self) -> dict[str, Any]:
        """The status; logged as a warning when the delta passed ``stale_share`` (the portfolio may be stale)."""
        status = self.status()
        if status["stale"]:
            logger.warning("the delta is %.1f%% of the corpus the portfolio was chosen on (above live_updates."
                           "stale_share=%.0f%%): the portfolio may be stale; rerun the pipeline",
                           100 * status["delta_share"], 100 * self.config.stale_share)
        return status

    def _done(self, applied: Applied) -> DocumentsResponse:
        try:  # the reply says searchable: the next query finds the new version built
            self.warm()
        except Exception as exc:  # applied and logged already: a query will build it instead
            logger.warning("update %d applied; building its view failed (%s: %s)", applied.version,
                           type(exc).__name__, exc)
        status = self.warn_if_stale()
        logger.info("update %d: %d added, %d replaced, %d deleted; %d passages, delta %.1f%% of the base corpus",
                    applied.version, len(applied.added), len(applied.replaced), len(applied.deleted),
                    status["passages"], 100 * status["delta_share"])
        return DocumentsResponse(version=applied.version, added=list(applied.added), replaced=list(applied.replaced),
                                 deleted=list(applied.deleted), passages=status["passages"],
                                 delta_share=status["delta_share"], stale=status["stale"])

    def status(self) -> dict[str, Any]:
        """``/portfolio``'s ``live``: counts, the delta's share, staleness, members without live updates."""
        status = self.corpus.snapshot().status()
        registered = families()
        return {**status, "enabled": self.config.enabled,
                "log": self.corpus.log.path.name if self.corpus.log is not None else None,
                "stale": status["delta_share"] > self.config.stale_share, "stale_share": self.config.stale_share,
                "members_without_live_updates": [m.name for m in self.members if not _takes_updates(m, registered)]}


def _takes_updates(member: CandidateSpec, registered: dict[str, Any]) -> bool:
    """Whether ``member`` ranks passages added while serving: its family says so, and its index is in
    process (an Elasticsearch index filters itself and leaves deleted rows out, but holds the indexed
    rows only: added passages join it at the next run)."""
    family = registered.get(member.family)
    return family is not None and family.live_updates and member.params.get("backend", "inprocess") == "inprocess"


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class DocumentsAPI:
    """The HTTP handlers of ``/documents`` (see the module docstring)."""

    def __init__(self, documents: LiveDocuments) -> None:
        self.documents = documents
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ragfolio-update")  # one update at a time

    async def add(self, body: bytes) -> JSONResponse:
        """``POST /documents``: the reply comes once the documents are logged and searchable."""
        try:
            request = DocumentsRequest.model_validate_json(body)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            return _error(400, f"{where}: {first['msg']}")
        return await self._update(lambda: self.documents.add(request.documents))

    async def delete(self, pid: str) -> JSONResponse:
        """``DELETE /documents/{id}``: 404 when no passage has that id."""
        return await self._update(lambda: self.documents.delete(pid))

    def get(self, pid: str) -> JSONResponse:
        """``GET /documents/{id}``: the passage, or 404."""
        found = self.documents.get(pid)
        return _error(404, f"no passage has id {pid!r}") if found is None else JSONResponse(found)

    async def _update(self, call: Callable[[], DocumentsResponse]) -> JSONResponse:
        try:
            result = await asyncio.get_running_loop().run_in_executor(self._pool, call)
        except PermissionError as exc:
            return _error(403, str(exc))
        except KeyError as exc:
            return _error(404, f"no passage has id {exc.args[0]!r}")
        except ValueError as exc:  # a malformed document or too many: the message names the field
            return _error(400, str(exc))
        except Exception:
            logger.exception("request %s: /documents failed", current_request_id())
            return _error(500, INTERNAL_ERROR)
        return JSONResponse(result.model_dump(mode="json"))

    def close(self) -> None:
        self._pool.shutdown(wait=True)
