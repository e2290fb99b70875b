"""What the service does per request, in plain Python: bundle in, response models out.

:class:`ServingEngine` loads and verifies the bundle, builds the :class:`AdaptiveRAG` and the
answerer once, and turns requests into core calls and core results into the response models of
:mod:`ragfolio.serving.schemas`. Its methods block (retrieval and LLM calls); the BentoML service
runs them in its thread pools. It imports no BentoML, so it can be used and tested on its own.

``num_docs`` per request: the members were selected, and the router trained, with the bundle's
``num_docs``, which is the default. A request may ask for 1..``max_num_docs`` passages per member;
each distinct value gets a view of the runner that differs only in ``num_docs`` and shares every
corpus part (indexes, passage graph, encoders) and query part (embeddings, first-stage rankings)
with the default one, so nothing is built twice. The views are kept (at most ``max_num_docs``).

Member errors: a response says only that a member timed out (with the deadline) or failed
(:func:`public_error`); the exception's text, which may hold an internal URL or a credential
(an index server's address, say), goes only to the log, under the request's id.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any

from ragfolio.core.answering import Answerer, make_backend
from ragfolio.core.artifacts import PortfolioBundle, load_bundle
from ragfolio.core.inference import MemberResults
from ragfolio.core.rag import AdaptiveRAG, RAGAnswer, RoutedRetrieval
from ragfolio.serving.config import ServingConfig
from ragfolio.serving.schemas import (
    AnswerResponse,
    Candidate,
    Limits,
    MemberInfo,
    MemberResult,
    MergedPassage,
    Passage,
    PortfolioInfo,
    RetrieveResponse,
    Tokens,
)

logger = logging.getLogger(__name__)

MEMBER_FAILED = "failed (the server log has the detail under this response's x-request-id)"


def public_error(error: str | None) -> str | None:
    """What a response may say of a member's ``error``: its timeout as it is, else only that it failed.

    Core's :class:`ragfolio.core.inference.MemberRun` reports ``"timeout after <s> s"`` or
    ``"<ExceptionType>: <message>"``; the message is for the log only.
    """
    if error is None or error.startswith("timeout after "):
        return error
    return MEMBER_FAILED


class ServingEngine:
    """A loaded bundle answering retrieval and answering requests.

    Args:
        config: The service settings.

    Raises:
        FileNotFoundError: ``config.bundle`` holds no bundle.
        ragfolio.core.artifacts.BundleIntegrityError: A bundle file differs from its recorded
            checksum (the message names the file).
        ValueError: ``config.default_l`` is larger than the bundle's k, or the LLM config is invalid.
    """

    def __init__(self, config: ServingConfig) -> None:
        start = time.perf_counter()
        self.config = config
        self.bundle: PortfolioBundle = load_bundle(config.bundle, verify=True)
        bundle = self.bundle
        self.default_l = config.default_l or bundle.default_l
        if not 1 <= self.default_l <= bundle.k:
            raise ValueError(f"default_l={self.default_l} must be in 1..{bundle.k} (the bundle's members)")
        self.answerer = Answerer(make_backend(config.llm), **config.answerer.model_dump())
        self.rag = bundle.rag(self.answerer, timeout_s=config.member_timeout_s)
        self.num_docs = self.rag.runner.num_docs
        # A view shares the runner's first-stage rankings, which are prefilter_depth deep.
        max_num_docs = min(config.max_num_docs, self.rag.runner.prefilter_depth)
        if max_num_docs < config.max_num_docs:
            logger.warning("max_num_docs=%d capped to the bundle's prefilter_depth=%d",
                           config.max_num_docs, max_num_docs)
        self.limits = Limits(bundle.k, config.max_query_chars, config.max_batch, max_num_docs)
        self._views: dict[int, AdaptiveRAG] = {self.num_docs: self.rag}
        self._views_lock = threading.Lock()
        self.load_ms = 1000 * (time.perf_counter() - start)
        logger.info("bundle %s (version %s, k=%d, %d passages, corpus %s) loaded from %s in %.0f ms", bundle.name,
                    bundle.version, bundle.k, len(bundle.corpus), bundle.corpus.fingerprint, config.bundle,
                    self.load_ms)

    # --- start-up -----------------------------------------------------------------------------
    def warm_up(self) -> None:
        """Build every corpus part and load the encoders (one query through all k members), and
        load the embedded LLM; an LLM that cannot load is logged (``/answer`` then says why)."""
        start = time.perf_counter()
        self.rag.retrieve("warm-up", self.bundle.k)
        self.rag.runner.forget_queries()
        if self.config.llm.get("kind") in ("transformers", "llama_cpp"):  # in process: load it now
            try:
                self.answerer.backend.complete([{"role": "user", "content": "Answer:"}], max_tokens=1)
            except Exception as exc:  # /retrieve must still work; /answer reports the cause per request
                logger.warning("the embedded LLM did not load (%s: %s); /answer will return 503",
                               type(exc).__name__, exc)
        logger.info("warm-up done in %.0f ms", 1000 * (time.perf_counter() - start))

    def close(self) -> None:
        for view in self._views.values():
            view.close()

    # --- requests -----------------------------------------------------------------------------
    def _view(self, num_docs: int) -> AdaptiveRAG:
        """The AdaptiveRAG returning ``num_docs`` passages per member (see the module docstring)."""
        with self._views_lock:
            if (view := self._views.get(num_docs)) is None:
                runner = copy.copy(self.rag.runner)  # shallow: the parts memo and encoders are shared
                runner.num_docs = num_docs
                view = AdaptiveRAG(runner, self.rag.members, self.rag.router, self.rag.hasher, self.rag.encoders,
                                   timeout_s=self.config.member_timeout_s)
                self._views[num_docs] = view
            return view

    def retrieve(
        self, query: str, l: int | None = None, num_docs: int | None = None, request_id: str | None = None  # noqa: E741
    ) -> RetrieveResponse:
        """Route ``query`` to l members, run them concurrently and merge their passages.

        A member's failure is logged with ``request_id`` and its detail; the response says only
        :func:`public_error`.
        """
        l = l or self.default_l  # noqa: E741
        num_docs = num_docs or self.num_docs
        start = time.perf_counter()
        routed = self._view(num_docs).retrieve(query.strip(), l)
        total_ms = 1000 * (time.perf_counter() - start)
        return RetrieveResponse(
            query=query, l=l, num_docs=num_docs, members=self._members(routed, request_id),
            passages=self._merged(routed.results), degraded=routed.results.degraded,
            reasons=self._reasons(routed.results),
            latency_ms={"route": routed.route_ms, "shared": routed.results.shared_ms,
                        "members": routed.results.latency_ms - routed.results.shared_ms, "total": total_ms},
        )

    def answer(self, query: str, l: int | None = None, request_id: str | None = None) -> AnswerResponse:  # noqa: E741
        """Retrieve with l routed members, answer from each one's passages, select one answer.

        Member failures are handled as in :meth:`retrieve`.

        Raises:
            ragfolio.core.llm.LLMUnavailableError: The LLM cannot be reached.
            ragfolio.core.llm.LLMRequestError: The LLM endpoint rejected a request.
        """
        l = l or self.default_l  # noqa: E741
        result: RAGAnswer = self.rag.answer(query.strip(), l)
        results = result.retrieval.results
        return AnswerResponse(
            query=query, l=l, answer=result.answer, chosen=result.chosen,
            chosen_member=result.candidates[result.chosen][0] if result.chosen >= 0 else None,
            fallback=result.fallback,
            candidates=[Candidate(member=name, answer=text) for name, text in result.candidates],
            members=self._members(result.retrieval, request_id), passages=self._merged(results),
            degraded=results.degraded, reasons=self._reasons(results), latency_ms=dict(result.latency_ms),
            tokens=Tokens(
                prompt=result.prompt_tokens, completion=result.completion_tokens, total=result.tokens,
                calls={stage: {"prompt": c.prompt_tokens, "completion": c.completion_tokens,
                               "latency_ms": c.latency_ms} for stage, c in result.calls.items()},
            ),
        )

    def portfolio(self) -> PortfolioInfo:
        """The members, their parameters, the metrics they were selected with, the bundle's and corpus's identity."""
        bundle = self.bundle
        return PortfolioInfo(
            name=bundle.name, version=bundle.version, checksum=bundle.checksum,
            ragfolio_version=str(bundle.manifest.get("ragfolio_version", "")), k=bundle.k,
            default_l=self.default_l, num_docs=self.num_docs, n_passages=len(bundle.corpus),
            corpus_fingerprint=bundle.corpus.fingerprint,
            members=[MemberInfo(name=m.name, family=m.family, params=dict(m.params)) for m in bundle.members],
            selection=bundle.selection, routing=bundle.routing,
            limits={"max_query_chars": self.limits.max_query_chars, "max_batch": self.limits.max_batch,
                    "max_body_bytes": self.config.max_body_bytes, "max_num_docs": self.limits.max_num_docs, "member_timeout_s": self.config.member_timeout_s,
                    "request_timeout_s": self.config.request_timeout_s,
                    "answer_timeout_s": self.config.answer_timeout_s, "llm": self.config.llm.get("kind")},
        )

    # --- response parts -----------------------------------------------------------------------
    def _passage(self, row: int, score: float | None = None) -> dict[str, Any]:
        corpus = self.bundle.corpus
        return {"id": corpus.ids[row], "title": corpus.titles[row], "text": corpus.texts[row], "score": score}

    def _members(self, routed: RoutedRetrieval, request_id: str | None) -> list[MemberResult]:
        out = []
        for j, score, run in zip(routed.members, routed.router_scores, routed.results.runs, strict=True):
            if not run.ok:
                logger.warning("request %s: member %s left out: %s", request_id, run.name, run.error)
            out.append(MemberResult(
                name=run.name, family=self.rag.members[j].family, router_score=score, ok=run.ok,
                error=public_error(run.error),
                latency_ms=run.latency_ms,
                passages=[Passage(**self._passage(i, s)) for i, s in zip(run.doc_ids, run.scores, strict=True)],
            ))
        return out

    @staticmethod
    def _reasons(results: MemberResults) -> list[str]:
        return [f"{run.name}: {public_error(run.error)}" for run in results.runs if not run.ok]

    def _merged(self, results: MemberResults) -> list[MergedPassage]:
        by_row: dict[int, list[str]] = {}
        for run in results.ok_runs:
            for row in run.doc_ids:
                by_row.setdefault(row, []).append(run.name)
        return [
            MergedPassage(**{k: v for k, v in self._passage(row).items() if k != "score"}, members=by_row[row])
            for row in results.merged_doc_ids()
        ]
