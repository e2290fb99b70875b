"""Nodes of ``answering_evaluation``: answer test questions with every system, resuming from the store."""

from __future__ import annotations

import hashlib
import json
import logging
import tempfile
from collections.abc import Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from ragfolio.core.answering.adaptive_rag import AdaptiveRAG
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.bundle import PortfolioBundle
from ragfolio.core.data.records import Question
from ragfolio.core.llm.backends import backend_identity, make_backend
from ragfolio.core.llm.chat import ChatBackend
from ragfolio.core.llm.reader import ReaderSettings
from ragfolio.core.retrieval.family import get_family
from ragfolio.core.retrieval.running.pool_runner import BASE_VERSION, COMPLETION_VERSION, PoolRunner
from ragfolio.core.routing.base import RouterProtocol
from ragfolio.core.routing.judging.splits import TrainedRouters
from ragfolio.core.routing.online import routes_on_retrieval
from ragfolio.core.scoring.utility_index import UtilityIndex, row_questions, split_rows
from ragfolio.core.system.routed_system import RoutedSystem
from ragfolio.param_blocks import kwargs_of
from ragfolio_lab.answering.scores import score_all
from ragfolio_lab.answering.store import AnswerStore, answer_all, settings_hash
from ragfolio_lab.answering.systems import PAPER_SYSTEMS, SystemRunner, run_order
from ragfolio_lab.answering.vendi_rag import VendiRAG
from ragfolio_lab.answering.vendirag_loop import AuthorsVendiRAG

logger = logging.getLogger(__name__)

VENDI_PASSED = ("answerer", "runner", "num_docs")  # what the node passes either Vendi-RAG loop
# Parameters no stored answer depends on, or (the last four) only some systems' (system_keys)
NOT_IN_KEY = {"max_questions_per_dataset", "datasets", "systems", "order_check_questions", "resume", "served_bundle",
              "routed_l", "wide_factor", "vendi_rag", "vendi_rag_authors"}
SERVICE = "service"  # service_l<l>: what `bentoml serve` answers by default (the served bundle's served_l<l>)
STORE_VERSION = 5  # bumped when a stored record's meaning changes, so old rows are not reused
# Bumped when the code that makes answers from a question (routing it, the systems, prompts, answerer,
# selector, the RAG loops; not the scores) answers otherwise for the same settings, members' rankings and
# LLM, whose versions the key holds apart (served_identity, backend_identity; tests/test_cache_versions.py).
ANSWERS_VERSION = 2  # 2: the reply names the passages it used; a one-word explanation


class AnsweringEvaluationParams(BaseModel):
    """``answering_evaluation`` parameters (conf/base/parameters_answering_evaluation.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_questions_per_dataset: int = Field(10, ge=1)
    datasets: list[str] | None = None
    systems: list[str] | Literal["all"] | None = None  # None: PAPER_SYSTEMS (those this run makes); "all": every one
    member_timeout_s: float = Field(30.0, gt=0)
    # the node passes the answerer, the runner and num_docs (candidate scoring's) to both Vendi-RAG loops
    vendi_rag: Annotated[dict[str, Any], kwargs_of(
        VendiRAG, "answering_evaluation.vendi_rag", VENDI_PASSED)] = Field(default_factory=dict)
    # vendirag's own loop as system vendi_rag_authors; None: not run
    vendi_rag_authors: Annotated[dict[str, Any], kwargs_of(
        AuthorsVendiRAG, "answering_evaluation.vendi_rag_authors", VENDI_PASSED)] | None = None
    routed_l: list[int] = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    retrieval_routers: bool = True
    served_bundle: bool = True  # also answer each dataset's questions from the served bundle (service_l<l>)
    wide_factor: int = Field(2, ge=0)
    system_order: Literal["fixed", "reversed", "shuffled"] = "shuffled"
    cold_caches: bool = True
    order_check_questions: int = Field(5, ge=0)
    resume: bool = True
    seed: int = 42



def _systems(chosen: list[str] | str | None) -> list[str] | None:
    """The systems to answer with: the paper's by default, every one for ``"all"``, else those named."""
    if chosen is None:
        return list(PAPER_SYSTEMS)
    return None if chosen == "all" else list(chosen)


def sample_test_questions(
    questions: list[dict[str, Any]], utility_index: UtilityIndex, params: dict[str, Any]
) -> dict[str, list[Question]]:
    """Per dataset, a seeded sample of at most ``max_questions_per_dataset`` of its test questions (the
    routers never saw them): ``test_questions``."""
    p = AnsweringEvaluationParams(**params)
    return {d: _test_questions(questions, utility_index, d, p.max_questions_per_dataset, p.seed)
            for d in utility_index.datasets}


def _test_questions(
    questions: list[dict[str, Any]], utility_index: UtilityIndex, dataset: str, n: int, seed: int
) -> list[Question]:
    """A seeded sample of at most ``n`` of the dataset's test questions."""
    qs = row_questions(questions, utility_index, dataset)
    test = split_rows(utility_index, dataset, "test")
    chosen = np.sort(np.random.default_rng(seed).permutation(test)[:n])
    return [qs[i] for i in chosen]


def _answer(
    systems: SystemRunner, dataset: str, system_order: str, seed: int, q: Question, only: list[str]
) -> list[dict[str, Any]]:
    """The records of the systems ``only`` for question ``q``, run in the question's order."""
    order = [s for s in run_order(systems.systems, system_order, seed, q.id) if s in only]
    return [a.record(q.id, dataset, q.answers) for a in systems.run(q.question, order)]


def _router_digest(router: RouterProtocol) -> str:
    """sha256 of the files the router saves (its settings and weights): a retrained router differs."""
    digest = hashlib.sha256()
    with tempfile.TemporaryDirectory() as folder:
        router.save(folder)
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file():
                digest.update(path.relative_to(folder).as_posix().encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def served_identity(bundle: PortfolioBundle, runner: PoolRunner) -> dict[str, Any]:
    """What a bundle's answers depend on beyond its settings: the bundle's checksum (every file it
    holds: corpus, embeddings, indexes, routers; empty for a bundle never saved), the encoders'
    identities (package and model versions, their code's version), the cross-encoder's weights'
    digest and the versions of the members' rankings (each family's, the first stages', completion's)."""
    rankings = {"families": {m.family: get_family(m.family).result_version for m in bundle.members},
                "base": BASE_VERSION, "completion": COMPLETION_VERSION}
    return {"bundle": bundle.checksum, "encoders": runner.encoder_ids,
            "cross_encoder": runner.cross_encoder.digest if bundle.scoring.cross_encoder else None,
            "rankings": rankings}


def answer_store_key(settings: Mapping[str, Any], llm: Mapping[str, Any]) -> str:
    """The settings hash under which the answer store keeps a dataset's records.

    Args:
        settings: What the run's answers depend on as data: the dataset, its corpus, the pool
            settings, router features, members, systems, router digests, the parameters and the
            bundle's :func:`served_identity`. (Each question's text and gold are in its record's
            key, :func:`~ragfolio_lab.answering.store.question_digest`.)
        llm: The backend's identity (:func:`~ragfolio.core.llm.backends.backend_identity`:
            the model file's hash, the converter's and engine's package versions).

    Returns:
        :func:`settings_hash` of those, :data:`STORE_VERSION` and :data:`ANSWERS_VERSION` (the
        retrievers' and the LLM's versions are in ``settings`` and ``llm``), so a change that bumps
        one answers afresh. The scores are not part of it (:mod:`ragfolio_lab.answering.scores`
        computes them from the stored rows), so a changed metric re-scores instead of re-answering.
    """
    return settings_hash({"version": STORE_VERSION, **settings, "llm": dict(llm), "answers": ANSWERS_VERSION})


def system_keys(common: str, systems: Sequence[str], p: AnsweringEvaluationParams) -> dict[str, str]:
    """Each system's store key: ``common`` (:func:`answer_store_key`) and the parameters only that
    system reads, so adding a system to a run, or changing one system's block, answers with that
    system alone."""
    own = {"single_best_wide": {"wide_factor": p.wide_factor}, "vendi_rag": p.vendi_rag,
           "vendi_rag_authors": p.vendi_rag_authors}
    return {s: settings_hash({"common": common, "system": s, "own": own.get(s)}) for s in systems}



def reader_params(p: AnsweringEvaluationParams, reader: ReaderSettings) -> dict[str, Any]:
    """The parameters in a dataset's store key: this stage's that answers depend on, and the reader
    its bundle carries, under the names this stage's own ``llm`` and ``answerer`` had before the
    bundle carried the reader, so an unchanged reader keeps its stored answers."""
    return {**p.model_dump(exclude=NOT_IN_KEY), "llm": dict(reader.llm), "answerer": dict(reader.answerer)}


def _retrieval_routings(
    served: RoutedSystem, trained: dict[str, dict[str, RouterProtocol]], dataset: str
) -> dict[str, RoutedSystem]:
    """The served system routed by each router of ``dataset``'s portfolio that reads the retrieval
    (pre-retrieval, cascade, post-retrieval, a user's; :meth:`~ragfolio.core.system.routed_system.RoutedSystem.with_router`:
    the same members, runner and featurizer). A user's router there that reads query features only is left out, logged."""
    present = {mode: routers[dataset] for mode, routers in trained.items() if dataset in routers}
    if query_only := sorted(mode for mode, router in present.items() if not routes_on_retrieval(router)):
        logger.warning("%s: routers %s read query features only: not answered as <kind>_l<l> systems", dataset, query_only)
        present = {mode: router for mode, router in present.items() if mode not in query_only}
    if present and served.retrieval_features is None:
        raise ValueError("router_features has no 'retrieval_features' (the retrieval routers' featurizer): "
                         "run router_training again")
    return {mode: served.with_router(router) for mode, router in present.items()}


def answer_test_questions(
    test_questions: dict[str, list[Question]], bundles: Mapping[str, PortfolioBundle], served: PortfolioBundle,
    trained_routers: TrainedRouters, answer_store: AnswerStore, params: dict[str, Any],
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Answer each dataset's sampled test questions with every system; one row per question and system.

    Each dataset is answered from its own bundle (packaging's ``bundles``: the portfolio, its
    served router, the corpus it retrieved from and its indexes, as ``bentoml serve`` would load
    it), so ``served_l<l>`` is by construction what the service answers with; the other routers
    (``trained_routers``: the learned ones and the retrieval routers) route over the same members and
    runner. With
    ``served_bundle``, the same questions are also answered from ``served``, the bundle
    ``bentoml serve`` loads by default (packaging's pointer: ``all``), as systems ``service_l<l>``
    (its ``served_l<l>``). Every system computes its own query parts with cold caches, in the order
    ``system_order`` gives per question. A question whose records the ``answer_store`` holds under
    the same settings is not answered again; new ones are stored as each question ends.

    Returns:
        ``(answers, retrieval_orders)``: the rows, and for the first ``order_check_questions`` of each
        dataset every system's retrieval latency (no LLM call) in the fixed and the reversed order.
    """
    p = AnsweringEvaluationParams(**params)
    datasets = [d for d in test_questions if d in bundles]
    if missing := sorted(set(test_questions) - set(bundles)):
        raise ValueError(f"no bundle for datasets {missing} (packaging built {sorted(bundles)}): run packaging")
    if unknown := set(p.datasets or []) - set(datasets):
        raise ValueError(f"answering_evaluation.datasets {sorted(unknown)} are not among the datasets with a bundle "
                         f"{sorted(datasets)}")
    answer = partial(_answer_from, p=p, store=answer_store, backends={})  # one backend per reader: one model load
    trained = trained_routers.retrieval if p.retrieval_routers else {}
    chosen = _systems(p.systems)
    service = [s for s in chosen or [f"served_l{l}" for l in p.routed_l] if s.startswith("served_l")]
    rows: list[dict[str, Any]] = []
    orders: dict[str, Any] = {}
    for dataset in [d for d in datasets if p.datasets is None or d in p.datasets]:
        sample = test_questions[dataset]
        answered, orders[dataset] = answer(bundles[dataset], dataset, sample, trained_routers.learned.get(dataset),
                                           trained, chosen)
        rows += answered
        if not p.served_bundle or not service:
            continue
        if served.name == dataset:  # its own bundle is the served one: the same answers
            rows += [{**r, "system": SERVICE + r["system"].removeprefix("served")} for r in answered if r["system"] in service]
        else:  # what `bentoml serve` answers by default, as service_l<l>
            rows += answer(served, dataset, sample, None, {}, service, prefix=SERVICE)[0]
    return pd.DataFrame(rows), orders


def _answer_from(
    bundle: PortfolioBundle, dataset: str, sample: list[Question], learned_router: RouterProtocol | None,
    trained: dict[str, dict[str, RouterProtocol]], only: list[str] | None, *, p: AnsweringEvaluationParams,
    store: AnswerStore, backends: dict[str, ChatBackend], prefix: str | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``sample``'s scored records of the systems ``only`` (None: every one) answered from ``bundle``, and
    their retrieval orders; with ``prefix``, ``served_l<l>`` is named ``<prefix>_l<l>`` (no retrieval orders)."""
    reader, llm_key = bundle.reader, json.dumps(bundle.reader.llm, sort_keys=True)
    backend = backends[llm_key] = backends.get(llm_key) or make_backend(reader.llm)  # the bundle's reader
    answerer = Answerer(backend, **reader.answerer, seed=bundle.selector_seed)  # the service's selector order
    if above := [l for l in p.routed_l if l > bundle.k]:
        raise ValueError(f"answering_evaluation.routed_l {above} is above portfolio {bundle.name!r}'s k={bundle.k}: "
                         f"set each to at most {bundle.k}")
    rag = AdaptiveRAG.from_bundle(bundle, answerer, timeout_s=p.member_timeout_s)
    served, runner, num_docs = rag.system, rag.system.runner, bundle.scoring.num_docs
    learned = None if learned_router is None else served.with_router(learned_router)
    routed = _retrieval_routings(served, trained, dataset)
    online = {mode: system.online for mode, system in routed.items() if system.online is not None}
    systems = SystemRunner(
        rag, bundle.members[bundle.single_best], VendiRAG(answerer, runner, num_docs=num_docs, **p.vendi_rag),
        authors_vendi=None if p.vendi_rag_authors is None or prefix else AuthorsVendiRAG(
            answerer, runner, num_docs=num_docs, **p.vendi_rag_authors),
        wide_runner=served.executor.at_depth(p.wide_factor * num_docs).runner if p.wide_factor and not prefix else None,
        retrieval_routers=online, learned=learned, ls=p.routed_l, cold_caches=p.cold_caches,
        only=only, strict=isinstance(p.systems, list) or prefix is not None,
    )
    key = answer_store_key({
        "dataset": dataset, "corpus": runner.corpus_key, "pool_settings": bundle.scoring.to_dict(),
        **served_identity(bundle, runner),
        "router_features": bundle.routing.to_dict(), "members": [m.name for m in bundle.members],
        "single_best": systems.single_best.name,
        "served": {"router": _router_digest(bundle.router), "routed_ls": bundle.routed_ls},
        "routers": {**({} if learned is None else {"learned": _router_digest(learned.router)}),
                    **{m: _router_digest(o.router) for m, o in online.items()}},
        "params": reader_params(p, reader),
    }, backend_identity(reader.llm))
    names = {s: f"{prefix}{s.removeprefix('served')}" if prefix else s for s in systems.systems}
    systems.retrieval_ms("warm-up query", systems.systems)  # build indexes, load encoders, outside the timings

    def answer(q: Question, missing: list[str]) -> list[dict[str, Any]]:
        ran = _answer(systems, dataset, p.system_order, p.seed, q, [s for s in systems.systems if names[s] in missing])
        return [{**r, "system": names[r["system"]]} for r in ran]

    settings = {names[s]: k for s, k in system_keys(key, systems.systems, p).items()}
    answered, reused = answer_all(sample, settings, store, answer, resume=p.resume,
                                  desc=f"{dataset} answering{f' ({prefix}: {bundle.name})' if prefix else ''}")
    # scored as read, against the questions' gold as it is now: the store keeps answers, not scores
    rows = score_all(answered, runner.texts, {q.id: q.answers for q in sample})
    orders = [] if prefix else [
        {"id": q.id, **{how: systems.retrieval_ms(q.question, run_order(systems.systems, how, p.seed, q.id))
                        for how in ("fixed", "reversed")}}
        for q in sample[: p.order_check_questions]
    ]
    logger.info("%s%s: %d questions, %d read from the answer store (settings %s)", dataset,
                f" ({prefix}: bundle {bundle.name})" if prefix else "", len(sample), reused, key)
    rag.close()
    for system in [*([] if learned is None else [learned]), *routed.values()]:
        system.close()
    return rows, orders
