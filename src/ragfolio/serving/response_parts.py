"""The parts of a response that name passages and members: core results as the schemas' models.

Passages are read from the living corpus's current snapshot (a row never changes meaning, so a
list ranked before an update reads the same passages after it), with their metadata. A member's
error is told only as :func:`public_error` says: its timeout, or that it failed; the exception's text,
which may hold an internal URL or a credential, goes only to the log, under the request's id.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ragfolio.core.corpus.live_corpus import LiveCorpus
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.running.member_executor import MemberResults
from ragfolio.core.system.routed_system import RoutedRetrieval
from ragfolio.serving.schemas import MemberResult, MergedPassage, Passage

logger = logging.getLogger(__name__)

MEMBER_FAILED = "failed (the server log has the detail under this response's x-request-id)"


def public_error(error: str | None) -> str | None:
    """What a response may say of a member's ``error``: its timeout as it is, else only that it failed.

    Core's :class:`ragfolio.core.retrieval.running.member_executor.MemberRun` reports ``"timeout after <s> s"`` or
    ``"<ExceptionType>: <message>"``; the message is for the log only.
    """
    if error is None or error.startswith("timeout after "):
        return error
    return MEMBER_FAILED


class ResponseParts:
    """Passages, member results and the merged list of a response (see the module docstring)."""

    def __init__(self, corpus: LiveCorpus, members: Sequence[CandidateSpec]) -> None:
        self.corpus, self.members_ = corpus, list(members)

    def passage(self, row: int, score: float | None = None) -> dict[str, Any]:
        pid, title, text, metadata = self.corpus.snapshot().passage(row)
        return {"id": pid, "title": title, "text": text, "score": score,
                "metadata": None if metadata is None else dict(metadata)}

    def members(self, routed: RoutedRetrieval, request_id: str | None) -> list[MemberResult]:
        out = []
        for j, score, run in zip(routed.members, routed.router_scores, routed.results.runs, strict=True):
            if not run.ok:
                logger.warning("request %s: member %s left out: %s", request_id, run.name, run.error)
            out.append(MemberResult(
                name=run.name, family=self.members_[j].family, router_score=score, ok=run.ok,
                error=public_error(run.error),
                latency_ms=run.latency_ms,
                passages=[Passage(**self.passage(i, s)) for i, s in zip(run.doc_ids, run.scores, strict=True)],
            ))
        return out

    @staticmethod
    def reasons(results: MemberResults) -> list[str]:
        return [f"{run.name}: {public_error(run.error)}" for run in results.runs if not run.ok]

    def merged(self, results: MemberResults) -> list[MergedPassage]:
        by_row: dict[int, list[str]] = {}
        for run in results.ok_runs:
            for row in run.doc_ids:
                by_row.setdefault(row, []).append(run.name)
        return [
            MergedPassage(**{k: v for k, v in self.passage(row).items() if k != "score"}, members=by_row[row])
            for row in results.merged_doc_ids()
        ]
