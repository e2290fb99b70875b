"""What the service does per request, in plain Python: bundle in, response models out.

:class:`ServingEngine` loads and verifies the bundle, builds the routed system, the answerer and the
:class:`AdaptiveRAG` answering on top of it once, and turns requests into core calls and core results
into the response models of :mod:`ragfolio.serving.schemas`. Its methods block (retrieval and LLM calls); the BentoML service
runs them in its thread pools. It imports no BentoML, so it can be used and tested on its own.

A request's ``l`` and ``num_docs`` are resolved once, here at the edge (:meth:`ServingEngine.item`,
:class:`ragfolio.core.system.request.RequestRules`: the configured ``default_l`` and the bundle's
``num_docs`` when it does not say, each checked against its range); what is below takes the
resolved :class:`~ragfolio.core.system.request.RetrievalRequest` as it is.

Retrieval works on batches (:meth:`ServingEngine.retrieve_many`, :meth:`ServingEngine.route_many`),
for every router (:meth:`ragfolio.core.system.routed_system.RoutedSystem.retrieve_batch`): the queries of a
batch are encoded together (one call per encoder) or, for a router that sees the retrieval
(``pre_retrieval``, ``post_retrieval``), ranked by the shared first stage together; post-retrieval
every member runs once over the batch before routing; the features of the batch are computed in
one call and routed with one predict call per distinct l; each member chosen by any query at a
depth runs once over those queries
(:meth:`ragfolio.core.retrieval.running.member_executor.PortfolioExecutor.run_plans`). The service
gathers concurrent requests into such batches (:class:`ragfolio.core.batching.MicroBatcher`),
``/answer``'s retrievals included. A query's passages and routing are the same whether it came
alone or in a batch. Each response's ``latency_ms`` carries the routing's stages (``stage.<name>``,
the batch's) and ``batch_size``.

Answers: :meth:`ServingEngine.answer` returns the whole response; :meth:`ServingEngine.answer_stream`
yields the answer's text as the reader writes it when one reader's answer is the answer (l = 1),
then the same response. A chat's follow-up is made standalone first (:meth:`ServingEngine.standalone`:
one call to the answerer's LLM); its call is the response's ``rewrite`` call (:data:`REWRITE_CALL`).

The LLM: the bundle's reader (what answering evaluation answered with) with the settings' ``llm``
over it. An in-process kind (the embedded model) runs by default in a process of its own, an
OpenAI-compatible server the engine starts and keeps running (:mod:`ragfolio.core.llm.process`,
:meth:`ServingEngine.start_llm`); its crash or hang fails ``/answer`` calls with
:class:`~ragfolio.core.llm.chat.LLMUnavailableError` and touches nothing else. Neither the readiness
path nor retrieval waits on it.

``num_docs`` per request: the members were selected, and the router trained, with the bundle's
``num_docs``, which is the default. A request may ask for 1..``max_num_docs`` passages per member;
each distinct value runs on the executor at that depth
(:meth:`~ragfolio.core.retrieval.running.member_executor.PortfolioExecutor.at_depth`: made once and
kept, sharing every corpus part, such as indexes, passage graph and encoders, and query part, such
as embeddings and first-stage rankings, with the default one, so nothing is built twice). Such a
request is **routed at the bundle's** ``num_docs`` (the features the router was trained on: a
post-retrieval router sees the k members' lists at that depth) and its routed members run at the
requested depth; the queries of a batch share their routing, and those that share a depth their runs.

Member errors: a response says only that a member timed out (with the deadline) or failed
(:func:`public_error`); the exception's text, which may hold an internal URL or a credential
(an index server's address, say), goes only to the log, under the request's id.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ragfolio.core.answering.adaptive_rag import AdaptiveRAG, RAGAnswer
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.answering.conversation import Rewrite, Turn, standalone_question
from ragfolio.core.answering.streaming import stream_answer
from ragfolio.core.bundle import PortfolioBundle, live_folder, load_bundle, resolve_bundle
from ragfolio.core.corpus.carry_over import open_log
from ragfolio.core.corpus.filters import Filter, parse_filter
from ragfolio.core.corpus.live_corpus import LiveCorpus
from ragfolio.core.llm.backends import make_backend
from ragfolio.core.llm.chat import PLAIN, ChatBackend, Completion, LocalModel
from ragfolio.core.llm.process import LLMProcess, ProcessBackend
from ragfolio.core.retrieval.encoders.kinds import with_query_engine
from ragfolio.core.system.live_systems import LiveSystems
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedRetrieval, RoutedSystem
from ragfolio.serving.config import ServingConfig
from ragfolio.serving.faults import inject_fault
from ragfolio.serving.live_documents import LiveDocuments
from ragfolio.serving.response_parts import MEMBER_FAILED, ResponseParts, public_error  # noqa: F401 - public here too
from ragfolio.serving.schemas import (
    AnswerResponse,
    Candidate,
    Limits,
    MemberInfo,
    Passage,
    PortfolioInfo,
    RetrieveResponse,
    Tokens,
)

logger = logging.getLogger(__name__)
REWRITE_CALL = "rewrite"  # the follow-up's rewrite in a response's tokens.calls


@dataclass(frozen=True)
class RetrievalItem:
    """One query of a retrieval batch (:meth:`ServingEngine.item`).

    Attributes:
        request: The request as resolved at the edge: what is routed and retrieved.
        query: The query as sent (the response echoes it).
        request_id: The request's id (the log's and the response's ``x-request-id``).
        where: The request's metadata filter (None: every passage).
    """

    request: RetrievalRequest
    query: str
    request_id: str | None = None
    where: Filter | None = None


class ServingEngine:
    """A loaded bundle answering retrieval and answering requests.

    Args:
        config: The service settings.

    Raises:
        FileNotFoundError: ``config.bundle`` holds no bundle (nor a pointer to one,
            :func:`~ragfolio.core.bundle.resolve_bundle`).
        ragfolio.core.bundle.BundleIntegrityError: A bundle file differs from its recorded
            checksum (the message names the file).
        ValueError: ``config.default_l`` is larger than the bundle's k, the LLM config (the bundle's
            reader with ``config.llm`` over it) is invalid, or
            ``config.fault_injection`` names no member.
    """

    def __init__(self, config: ServingConfig) -> None:
        start = time.perf_counter()
        self.config = config
        folder = resolve_bundle(config.bundle)  # a bundle folder, or packaging's pointer to the served one
        bundle = load_bundle(folder, verify=True)
        if config.query_engine is not None:  # a runtime choice, like the device: the same vectors
            encoders = with_query_engine(bundle.scoring.encoders, config.query_engine)
            bundle = replace(bundle, scoring=replace(bundle.scoring, encoders=encoders))
        self.bundle: PortfolioBundle = bundle
        self.llm_process: LLMProcess | None = None
        # the bundle's reader, as answering evaluation answered with it, with serving.yml's overrides
        self.reader = bundle.reader.overridden(config.llm, config.answerer.model_dump(exclude_none=True))
        # the selector's order from the bundle's seed: the order answering evaluation measured
        self.answerer = Answerer(self._backend(self.reader.llm, config), **self.reader.answerer, seed=bundle.selector_seed)
        self.system = RoutedSystem.from_bundle(bundle, timeout_s=config.member_timeout_s)
        self.rag = AdaptiveRAG(self.system, self.answerer)
        inject_fault(self.system, config.fault_injection)
        # the corpus as it lives: the bundle's, with the documents added and deleted since (replayed from the log)
        live = config.live_updates
        log = open_log(live_folder(folder) / live.log, bundle.corpus) if live.enabled else None
        self.live = LiveCorpus(bundle.corpus, self._encode_passages, log)
        self.systems = LiveSystems(self.system, self.live)
        self.documents = LiveDocuments(self.live, live, bundle.members, warm=self.systems.warm)
        self.documents.warn_if_stale()
        self.parts = ResponseParts(self.live, self.system.members)
        if config.fault_injection is not None:
            logger.warning("fault injection (benchmarks and tests only): member %s sleeps %.3g s per run",
                           config.fault_injection.member, config.fault_injection.delay_s)
        self.num_docs = self.system.depth
        # the defaults and ranges of a request's l and num_docs; raises for a default_l outside 1..k
        self.rules = self.system.rules(bundle.default_l if config.default_l is None else config.default_l)
        self.default_l = self.rules.default_l
        # Another depth shares the runner's first-stage rankings, which are prefilter_depth deep.
        max_num_docs = min(config.max_num_docs, self.system.runner.prefilter_depth)
        if max_num_docs < config.max_num_docs:
            logger.warning("max_num_docs=%d capped to the bundle's prefilter_depth=%d",
                           config.max_num_docs, max_num_docs)
        self.limits = Limits(bundle.k, config.max_query_chars, config.max_batch, max_num_docs)
        self.load_ms = 1000 * (time.perf_counter() - start)
        logger.info("bundle %s (version %s, k=%d, %d passages, corpus %s) loaded from %s in %.0f ms", bundle.name,
                    bundle.version, bundle.k, len(bundle.corpus), bundle.corpus.fingerprint, folder,
                    self.load_ms)
        if bundle.routed_ls is not None and not bundle.routes_at(self.default_l):
            why = (bundle.selection.get("served_router") or {}).get("reason", "")
            logger.warning("routing is off at the default l=%d: %s alone serves %d passages a request "
                           "(routes at l = %s). %s", self.default_l, bundle.members[bundle.single_best].name,
                           self.system.unrouted_depth(self.default_l, self.num_docs), list(bundle.routed_ls) or "none",
                           why)

    def _encode_passages(self, texts: list[str]) -> dict[str, Any]:
        """Vectors of added passages for every encoder the bundle carries passage vectors of."""
        return {name: self.system.runner._encode(name, texts, queries=False) for name in self.bundle.embeddings}

    # --- start-up -----------------------------------------------------------------------------
    def _backend(self, llm: dict[str, Any], config: ServingConfig) -> ChatBackend:
        """The answerer's LLM (``llm``: the reader's), or a client of its supervised process."""
        backend = make_backend(llm)  # checks the settings; loads nothing
        if not isinstance(backend, LocalModel) or config.llm_process.mode == "in_process":
            return backend
        settings = config.llm_process
        self.llm_process = LLMProcess(
            llm, max_batch=settings.max_batch, max_wait_ms=settings.max_wait_ms,
            health_interval_s=settings.health_interval_s, unhealthy_after=settings.unhealthy_after,
            max_call_s=settings.max_call_s, backoff_s=settings.backoff_s, max_backoff_s=settings.max_backoff_s,
        )
        return ProcessBackend(self.llm_process, api="completions" if getattr(backend, "chat_format", None) == PLAIN else "chat",
                              timeout_s=settings.call_timeout_s)

    def start_llm(self) -> None:
        """Start the LLM's process, or load an in-process LLM in a background thread; returns at once.

        Until it is up, ``/answer`` fails with :class:`~ragfolio.core.llm.chat.LLMUnavailableError`
        (subprocess) or waits for the load (in process); retrieval never waits.
        """
        if self.llm_process is not None:
            self.llm_process.start()
        elif isinstance(backend := self.answerer.backend, LocalModel):
            threading.Thread(target=self._load_in_process, args=(backend,), name="llm-load", daemon=True).start()

    @staticmethod
    def _load_in_process(backend: LocalModel) -> None:
        try:
            backend.load()
        except Exception as exc:  # /retrieve must still work; /answer reports the cause per request
            logger.warning("the embedded LLM did not load (%s: %s); /answer will return 503", type(exc).__name__, exc)

    def warm_up(self) -> None:
        """Build every corpus part and load the encoders (one query through all k members)."""
        start = time.perf_counter()
        self.system.warm_up()
        self.system.runner.forget_queries()
        logger.info("warm-up done in %.0f ms", 1000 * (time.perf_counter() - start))

    def close(self) -> None:
        if self.llm_process is not None:
            self.llm_process.stop()
        self.systems.close()
        self.system.close()

    # --- requests -----------------------------------------------------------------------------
    def item(
        self, query: str, l: int | None = None, num_docs: int | None = None, request_id: str | None = None,  # noqa: E741
        where: Any = None,
    ) -> RetrievalItem:
        """The edge: ``query`` with ``l`` members and ``num_docs`` passages each (None: the defaults),
        resolved and checked once (:meth:`ragfolio.core.system.request.RequestRules.request`), and
        the metadata filter ``where`` parsed (:func:`ragfolio.core.corpus.filters.parse_filter`).

        Raises:
            ValueError: ``l`` is outside 1..k, ``num_docs`` outside 1..``prefilter_depth``, or the
                filter is malformed (:class:`~ragfolio.core.corpus.filters.FilterError`, naming the field).
        """
        parsed = None if where is None else parse_filter(where)
        return RetrievalItem(self.rules.request(query.strip(), l, num_docs), query, request_id, parsed)

    def retrieve(
        self, query: str, l: int | None = None, num_docs: int | None = None, request_id: str | None = None,  # noqa: E741
        where: Any = None,
    ) -> RetrieveResponse:
        """Route ``query`` to l members, run them concurrently and merge their passages (a batch of one)."""
        return self.retrieve_many([self.item(query, l, num_docs, request_id, where)])[0]

    def route_many(self, items: Sequence[RetrievalItem]) -> list[RoutedRetrieval]:
        """Route and retrieve a batch of queries (see the module docstring); results in order.

        One :meth:`~ragfolio.core.system.routed_system.RoutedSystem.retrieve_batch` of the items'
        requests: those whose l the router routes are routed together at the bundle's ``num_docs``
        and run at their own depth; the others are the single best member at l x their depth.
        """
        groups: dict[str, list[int]] = {}
        for i, item in enumerate(items):  # one system per filter: the corpus view it searches
            groups.setdefault("" if item.where is None else item.where.key(), []).append(i)
        out: list[RoutedRetrieval | None] = [None] * len(items)
        for rows in groups.values():
            system = self.systems.system_for(items[rows[0]].where)
            for i, routed in zip(rows, system.retrieve_batch([items[i].request for i in rows]), strict=True):
                out[i] = routed
        return [routed for routed in out if routed is not None]

    def retrieve_many(self, items: Sequence[RetrievalItem]) -> list[RetrieveResponse]:
        """Retrieve for a batch of queries at once (see the module docstring); responses in order.

        A member's failure is logged with each query's ``request_id`` and its detail; the
        responses say only :func:`public_error`. Latencies are the batch's.
        """
        if not items:
            return []
        start = time.perf_counter()
        routed = self.route_many(items)
        total_ms = 1000 * (time.perf_counter() - start)
        return [self._retrieve_response(item, r, total_ms) for item, r in zip(items, routed, strict=True)]

    def _retrieve_response(self, item: RetrievalItem, routed: RoutedRetrieval, total_ms: float) -> RetrieveResponse:
        """The response of one routed retrieval (``total_ms``: the batch's, or the query's alone)."""
        results = routed.results
        return RetrieveResponse(
            query=item.query, l=item.request.l, num_docs=item.request.depth, routed=routed.routed,
            members=self.parts.members(routed, item.request_id),
            passages=self.parts.merged(results), degraded=results.degraded, reasons=self.parts.reasons(results),
            latency_ms=self._latency(routed, total_ms), batch_size=routed.batch_size,
        )

    @staticmethod
    def _latency(routed: RoutedRetrieval, total_ms: float) -> dict[str, float]:
        """``route``, ``shared``, ``members``, ``total`` and the routing's ``stage.<name>``."""
        results = routed.results
        return {"route": routed.route_ms, "shared": results.shared_ms,
                "members": results.latency_ms - results.shared_ms, "total": total_ms,
                **{f"stage.{name}": ms for name, ms in routed.stages_ms.items()}}

    def standalone(self, turns: Sequence[Turn], question: str, request_id: str | None = None) -> Rewrite:
        """The chat's follow-up ``question`` made standalone from the earlier ``turns`` by the answerer's
        LLM (:func:`~ragfolio.core.answering.conversation.standalone_question`: one call; none without
        turns). A call that fails, or a rewrite over ``max_query_chars``, keeps the question (logged
        under ``request_id``): the last message can still be answered as it is."""
        try:
            rewrite = standalone_question(self.answerer.backend, turns, question)
        except Exception as exc:  # the LLM's errors, whatever the backend: the rewrite is only a help
            logger.warning("request %s: the follow-up was not rewritten (%s: %s); answering the last message as it is",
                           request_id, type(exc).__name__, exc)
            return Rewrite.kept(question)
        if len(rewrite.question) > self.limits.max_query_chars:
            logger.warning("request %s: the follow-up's rewrite is over max_query_chars=%d; answering the last "
                           "message as it is", request_id, self.limits.max_query_chars)
            return Rewrite(question, False, rewrite.completion)
        return rewrite

    def answer(self, item: RetrievalItem, retrieval: RoutedRetrieval | None = None,
               rewrite: Rewrite | None = None) -> AnswerResponse:
        """Retrieve with l routed members, answer from each one's passages, select one answer.

        ``item``: the query, as :meth:`item` resolved it. ``retrieval``: the query's routed
        retrieval when it was made already, in a batch (:meth:`route_many`; the service batches
        ``/answer``'s retrievals so). ``rewrite``: the chat's rewrite that made the query
        (:meth:`standalone`), whose call the tokens count. Member failures are handled as in :meth:`retrieve`.

        Raises:
            ragfolio.core.llm.chat.LLMUnavailableError: The LLM cannot be reached.
            ragfolio.core.llm.chat.LLMRequestError: The LLM endpoint rejected a request.
        """
        result: RAGAnswer = self._rag(item).answer(item.request, retrieval=retrieval)
        return self._answer_response(item, result, rewrite)

    def answer_stream(self, item: RetrievalItem, retrieval: RoutedRetrieval | None = None,
                      rewrite: Rewrite | None = None) -> Iterator[str | AnswerResponse]:
        """:meth:`answer` as it is written: the answer's text in pieces, then the response.

        The pieces (some empty: one per token the reader writes, so that a consumer can stop the
        answer anywhere) join to the response's ``answer``. They come as the reader writes them when one
        member's passages are answered from (l = 1, or every other routed member failed); with
        two or more the answer exists only once the selector has chosen, and no piece comes
        before the response (:func:`ragfolio.core.answering.streaming.stream_answer`). Raises
        what :meth:`answer` raises, before the first piece or (the LLM lost mid-answer) after.
        """
        result = yield from stream_answer(self._rag(item), item.request, retrieval=retrieval)
        yield self._answer_response(item, result, rewrite)

    def _rag(self, item: RetrievalItem) -> AdaptiveRAG:
        """Answering over the corpus the item is served from (rows never change meaning: a retrieval
        made before an update reads the same passages after it)."""
        system = self.systems.system_for(item.where)
        return self.rag if system is self.system else AdaptiveRAG(system, self.answerer)

    def _answer_response(self, item: RetrievalItem, result: RAGAnswer, rewrite: Rewrite | None) -> AnswerResponse:
        results = result.retrieval.results
        calls = result.calls if rewrite is None else {REWRITE_CALL: rewrite.completion, **result.calls}
        total = Completion.total(calls.values())
        return AnswerResponse(
            query=item.query, l=item.request.l, routed=result.retrieval.routed, answer=result.answer,
            abstained=result.abstained, guess=result.guess,
            citations=[Passage(**self.parts.passage(row)) for row in result.cited], chosen=result.chosen,
            chosen_member=result.candidates[result.chosen][0] if result.chosen >= 0 else None,
            fallback=result.fallback,
            candidates=[Candidate(member=name, answer=text) for name, text in result.candidates],
            members=self.parts.members(result.retrieval, item.request_id), passages=self.parts.merged(results),
            degraded=results.degraded, reasons=self.parts.reasons(results),
            latency_ms={**result.latency_ms, **{f"stage.{name}": ms for name, ms in result.retrieval.stages_ms.items()}},
            batch_size=result.retrieval.batch_size,
            tokens=Tokens(
                prompt=total.prompt_tokens, completion=total.completion_tokens, total=total.tokens,
                calls={stage: {"prompt": c.prompt_tokens, "completion": c.completion_tokens,
                               "latency_ms": c.latency_ms} for stage, c in calls.items()},
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
            router=bundle.router.name, routed_ls=None if bundle.routed_ls is None else list(bundle.routed_ls),
            single_best=bundle.members[bundle.single_best].name,
            router_choice=bundle.selection.get("served_router"),
            selection=bundle.selection, routing=bundle.routing.to_dict(), selector_seed=self.answerer.seed,
            limits={"max_query_chars": self.limits.max_query_chars, "max_batch": self.limits.max_batch,
                    "max_body_bytes": self.config.max_body_bytes, "max_json_depth": self.config.max_json_depth,
                    "max_num_docs": self.limits.max_num_docs, "member_timeout_s": self.config.member_timeout_s,
                    "request_timeout_s": self.config.request_timeout_s,
                    "answer_timeout_s": self.config.answer_timeout_s, "llm": self.reader.llm.get("kind"),
                    "llm_process": self.config.llm_process.mode
                    if isinstance(self.answerer.backend, LocalModel | ProcessBackend) else None,
                    "batching": self.config.batching.model_dump()},
            live=self.documents.status(),
        )
