"""Nodes of ``router_training``: query features -> one router per portfolio -> the routing ablations."""

from __future__ import annotations

import logging
from typing import Any

import matplotlib

matplotlib.use("Agg")  # nodes run headless; set before pyplot is imported
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from pydantic import BaseModel, ConfigDict, Field  # noqa: E402

from ragfolio.core import routing  # noqa: E402
from ragfolio.core.artifacts import PortfolioBundle  # noqa: E402
from ragfolio.core.pool import encoders_used  # noqa: E402
from ragfolio.core.cache import ArrayCache  # noqa: E402
from ragfolio.core.corpora import Corpora  # noqa: E402
from ragfolio.core.data import Corpus  # noqa: E402
from ragfolio.core.features import Features, TextHasher, query_features, stack_rows, take_rows  # noqa: E402
from ragfolio.core.metrics import support_recall  # noqa: E402
from ragfolio.core.pool import CandidateSpec  # noqa: E402
from ragfolio.core.pool_runner import PoolRunner  # noqa: E402
from ragfolio.core.router import Router  # noqa: E402
from ragfolio.pipelines.candidate_scoring.nodes import (  # noqa: E402
    CandidateScoringParams,
    make_runner,
    scoreable_questions,
)
from ragfolio.pipelines.portfolio_selection.nodes import ALL, split_rows  # noqa: E402

logger = logging.getLogger(__name__)

ROUTERS = ("learned", "random", "top_average", "greedy_prefix", "logistic", "oracle")


class BundleParams(BaseModel):
    """What the served bundle holds (``router_training.bundle``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    portfolio: str = ALL
    default_l: int = Field(2, ge=1)


class RouterTrainingParams(BaseModel):
    """``router_training`` parameters (conf/base/parameters_router_training.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text_features: dict[str, Any] = Field(default_factory=dict)
    encoders: list[str] = Field(default_factory=lambda: ["minilm", "e5"])
    router: dict[str, Any] = Field(default_factory=dict)
    logistic_c: float = Field(1.0, gt=0)
    bundle: BundleParams = Field(default_factory=BundleParams)
    seed: int = 42

    def hasher(self) -> TextHasher:
        return TextHasher.from_dict(self.text_features)

    def new_router(self) -> Router:
        return Router(**{"random_state": self.seed, **self.router})


def corpus_runners(corpora: Corpora, cache: ArrayCache, scoring: CandidateScoringParams) -> dict[str, PoolRunner]:
    """One pool runner per distinct corpus, by corpus name, configured as candidate scoring ran them."""
    return {name: make_runner(corpus, cache, scoring) for name, corpus in corpora.corpora.items()}


def features_by_dataset(
    questions: list[dict[str, Any]], corpora: Corpora, runners: dict[str, PoolRunner],
    scoring: CandidateScoringParams, p: RouterTrainingParams,
) -> dict[str, Features]:
    """Router features of every question, per dataset, in utility-matrix row order.

    ``runners`` are :func:`corpus_runners`: datasets sharing a corpus share its runner.
    """
    unknown = set(p.encoders) - set(scoring.encoders)
    if unknown:
        raise ValueError(f"router_training.encoders {sorted(unknown)} are not candidate_scoring encoders {sorted(scoring.encoders)}")
    out = {}
    for dataset in corpora.datasets:
        texts = [q.question for q in scoreable_questions(questions, dataset)[0]]
        runner = runners[corpora.name_for(dataset)]
        embeddings = {name: runner.query_embeddings(name, texts) for name in p.encoders}
        out[dataset] = query_features(texts, embeddings, p.hasher())
    return out


def _split(
    features: dict[str, Features], utility_matrices: dict[str, np.ndarray], utility_index: dict[str, Any],
    key: str, members: list[int], split: str,
) -> tuple[Features, np.ndarray]:
    """Features and member utilities ``(n, k)`` of ``split`` rows of one dataset, or of all stacked."""
    datasets = list(utility_index["datasets"]) if key == ALL else [key]
    rows = {d: split_rows(utility_index, d, split) for d in datasets}
    X = stack_rows([take_rows(features[d], rows[d]) for d in datasets])
    U = np.concatenate([np.asarray(utility_matrices[d])[rows[d]][:, members] for d in datasets])
    return X, U


def train_routers(
    questions: list[dict[str, Any]], corpora: dict[str, Any],
    utility_matrices: dict[str, np.ndarray], utility_index: dict[str, Any], portfolios: dict[str, Any],
    cache: ArrayCache, scoring_params: dict[str, Any], params: dict[str, Any],
) -> dict[str, Router]:
    """One router per portfolio (each dataset's and ``all``), trained on its train questions."""
    p, scoring = RouterTrainingParams(**params), CandidateScoringParams(**scoring_params)
    sets = Corpora.from_json(corpora)
    features = features_by_dataset(questions, sets, corpus_runners(sets, cache, scoring), scoring, p)
    routers = {}
    for key, sel in portfolios["selections"].items():
        members = sel["greedy"][: portfolios["k"]]
        X, U = _split(features, utility_matrices, utility_index, key, members, "train")
        routers[key] = p.new_router().fit(X, U, members=sel["portfolio"])
        logger.info("%s: router over %d members trained on %d questions", key, len(members), len(U))
    return routers


class _TestRetrieval:
    """Candidates' rankings of each dataset's test questions at any depth, one runner per corpus and depth."""

    def __init__(self, questions: list[dict[str, Any]], corpora: Corpora, utility_index: dict[str, Any],
                 cache: ArrayCache, scoring: CandidateScoringParams, runners: dict[str, PoolRunner]) -> None:
        """``runners``: :func:`corpus_runners`, reused at the scoring depth ``num_docs``."""
        self.questions, self.corpora, self.index, self.cache, self.scoring = questions, corpora, utility_index, cache, scoring
        self._runners = {(name, scoring.num_docs): runner for name, runner in runners.items()}

    def test_set(self, dataset: str) -> tuple[list[str], list[list[int]]]:
        """Test questions' texts and gold passage rows, in utility-matrix order."""
        row_of = self.corpora.corpus_for(dataset).row_of()
        qs = scoreable_questions(self.questions, dataset)[0]
        test = split_rows(self.index, dataset, "test")
        return [qs[i].question for i in test], [[row_of[g] for g in qs[i].gold_passage_ids()] for i in test]

    def doc_ids(self, dataset: str, spec: CandidateSpec, texts: list[str], num_docs: int) -> np.ndarray:
        key = (self.corpora.name_for(dataset), num_docs)
        if key not in self._runners:
            corpus = self.corpora.corpus_for(dataset)
            self._runners[key] = make_runner(corpus, self.cache, self.scoring, num_docs=num_docs)
        return self._runners[key].run(spec, texts).doc_ids


def _same_budget(
    retrieval: _TestRetrieval, specs: list[CandidateSpec], datasets: list[str], members: list[int], single: int,
    picks: np.ndarray,
) -> dict[str, list[float]]:
    """Support recall of the union of the routed members' passages vs the single best at l x num_docs."""
    k, num_docs = len(members), retrieval.scoring.num_docs
    union, alone, offset = [[] for _ in range(k)], [[] for _ in range(k)], 0
    for dataset in datasets:
        texts, gold = retrieval.test_set(dataset)
        member_docs = [retrieval.doc_ids(dataset, specs[m], texts, num_docs) for m in members]
        for l in range(1, k + 1):
            deep = retrieval.doc_ids(dataset, specs[single], texts, l * num_docs)
            for q in range(len(texts)):
                routed = {int(d) for j in picks[offset + q, :l] for d in member_docs[j][q] if d >= 0}
                union[l - 1].append(support_recall(routed, gold[q]))
                alone[l - 1].append(support_recall({int(d) for d in deep[q] if d >= 0}, gold[q]))
        offset += len(texts)
    return {
        "routed_union_recall": [float(np.mean(v)) if v else 0.0 for v in union],
        "single_best_recall": [float(np.mean(v)) if v else 0.0 for v in alone],
    }


def evaluate_routers(
    questions: list[dict[str, Any]], corpora: dict[str, Any], candidates: list[dict[str, Any]],
    utility_matrices: dict[str, np.ndarray], utility_index: dict[str, Any], portfolios: dict[str, Any],
    routers: dict[str, Router], cache: ArrayCache, scoring_params: dict[str, Any], params: dict[str, Any],
) -> dict[str, Any]:
    """Best-of-l on test questions for the learned router and every ablation, gap closed, same budget.

    The report's ``corpus`` names the corpus (or per-dataset corpora) retrieved from.
    """
    p, scoring = RouterTrainingParams(**params), CandidateScoringParams(**scoring_params)
    sets = Corpora.from_json(corpora)
    runners = corpus_runners(sets, cache, scoring)
    features = features_by_dataset(questions, sets, runners, scoring, p)
    rng = np.random.default_rng(p.seed)
    retrieval = _TestRetrieval(questions, sets, utility_index, cache, scoring, runners)
    specs = [CandidateSpec.from_record(c) for c in candidates]
    report: dict[str, Any] = {"k": portfolios["k"], "num_docs": scoring.num_docs, "corpus": sets.describe(), "datasets": {}}
    for key, sel in portfolios["selections"].items():
        members = sel["greedy"][: portfolios["k"]]
        k = len(members)
        X_train, U_train = _split(features, utility_matrices, utility_index, key, members, "train")
        X, U = _split(features, utility_matrices, utility_index, key, members, "test")
        if len(U) == 0:
            continue
        by_average = np.argsort(-U_train.mean(axis=0), kind="stable")
        picks = {
            "learned": routers[key].predict_topl(X, k),
            "random": routing.random_picks(len(U), k, rng),
            "top_average": routing.fixed_picks(by_average, len(U)),
            "greedy_prefix": routing.fixed_picks(range(k), len(U)),
            "logistic": routing.LogisticRouter(C=p.logistic_c).fit(X_train, U_train).predict_topl(X, k),
            "oracle": routing.oracle_picks(U),
        }
        entry: dict[str, Any] = {"n_test": int(len(U)), "members": sel["portfolio"]}
        entry.update({name: {"best_of_l": routing.best_of_l(U, picks[name])} for name in ROUTERS})
        single = entry["top_average"]["best_of_l"][0]  # the member with the best train mean, on test
        entry["single_best_member"] = single
        entry["gap_closed_l1"] = routing.gap_closed(entry["learned"]["best_of_l"][0], single, entry["oracle"]["best_of_l"][0])
        entry["summary"] = {  # scalars for `dvc metrics show/diff`, which skips lists
            f"{name}_l{l}": entry[name]["best_of_l"][l - 1]
            for name in ("learned", "greedy_prefix", "top_average", "logistic") for l in (1, 2) if l <= k
        }
        datasets = list(utility_index["datasets"]) if key == ALL else [key]
        entry["same_budget"] = _same_budget(retrieval, specs, datasets, members, sel["top_by_average"][0], picks["learned"])
        report["datasets"][key] = entry
    _log_summary(report)
    return report


def _log_summary(report: dict[str, Any]) -> None:
    lines = [f"test best-of-l support recall, l = 1..{report['k']}"]
    for key, entry in report["datasets"].items():
        lines.append(f"{key} (n={entry['n_test']}), gap closed at l=1: {entry['gap_closed_l1']}")
        for name in ROUTERS:
            lines.append(f"  {name:<14}" + " ".join(f"{v:.3f}" for v in entry[name]["best_of_l"]))
        budget = entry["same_budget"]
        lines.append("  routed union  " + " ".join(f"{v:.3f}" for v in budget["routed_union_recall"]))
        lines.append("  single, l*n   " + " ".join(f"{v:.3f}" for v in budget["single_best_recall"]))
    logger.info("\n".join(lines))


def plot_router_curves(metrics: dict[str, Any]) -> plt.Figure:
    """One panel per dataset: test best-of-l of every router, and the same-budget single best."""
    keys = list(metrics["datasets"])
    fig, axes = plt.subplots(1, max(len(keys), 1), figsize=(4.2 * max(len(keys), 1), 3.6), squeeze=False, sharey=True)
    for ax, key in zip(axes[0], keys, strict=False):
        entry = metrics["datasets"][key]
        ls = np.arange(1, metrics["k"] + 1)
        for name, style in zip(ROUTERS, ("o-", "x:", "s--", "d--", "v-.", "k-"), strict=True):
            ax.plot(ls, entry[name]["best_of_l"], style, label=name, lw=1.2, ms=4)
        ax.plot(ls, entry["same_budget"]["single_best_recall"], "*:", color="grey", label="single best, l x num_docs")
        ax.set_title(f"{key} (n={entry['n_test']} test)")
        ax.set_xlabel("routed members l")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("best-of-l support recall")
    axes[0][-1].legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    return fig


def _served_corpus(
    corpora: Corpora, names: list[str], encoders: list[str], cache: ArrayCache, scoring: CandidateScoringParams,
) -> tuple[Corpus, dict[str, np.ndarray]]:
    """The corpus the bundle serves, and its ``(n_passages, dim)`` float32 embeddings by encoder.

    One corpus (always so with ``data_prep.corpus: union``) is served as it was measured, so its
    fingerprint is the reports'. Several (per-dataset corpora, the ``all`` portfolio) are stacked
    with passages repeated across them kept once; embeddings come from the retrieval cache (an
    encoder embeds each passage on its own, so the stacked rows are the corpora's rows).
    """
    if len(names) == 1:
        corpus = corpora.corpora[names[0]]
        runner = make_runner(corpus, cache.reader(), scoring)
        return corpus, {name: np.asarray(runner.passage_embeddings(name), dtype=np.float32) for name in encoders}
    records, parts, seen = [], {name: [] for name in encoders}, set()
    for corpus_name in names:
        corpus = corpora.corpora[corpus_name]
        runner = make_runner(corpus, cache.reader(), scoring)
        new = [i for i, pid in enumerate(corpus.ids) if pid not in seen]
        seen.update(corpus.ids[i] for i in new)
        rows = corpus.to_records()
        records += [rows[i] for i in new]
        for name in encoders:
            parts[name].append(runner.passage_embeddings(name)[new])
    return Corpus.from_records(records), {name: np.concatenate(v).astype(np.float32) for name, v in parts.items()}


def build_bundle(
    corpora: dict[str, Any], candidates: list[dict[str, Any]], portfolios: dict[str, Any],
    routers: dict[str, Router], router_metrics: dict[str, Any], cache: ArrayCache,
    scoring_params: dict[str, Any], params: dict[str, Any],
) -> PortfolioBundle:
    """The served bundle: one portfolio and its router over the corpus its datasets retrieved from.

    With ``data_prep.corpus: union`` that is the union corpus, the one every number was measured
    on (the manifest's ``corpus.fingerprint`` equals the reports' ``corpus.fingerprint``). With
    ``per_dataset`` corpora the ``all`` portfolio serves their stacking (see :func:`_served_corpus`).
    ``selection.corpus`` records what the selection metrics were measured on.
    """
    p, scoring = RouterTrainingParams(**params), CandidateScoringParams(**scoring_params)
    key = p.bundle.portfolio
    if key not in portfolios["selections"]:
        raise ValueError(f"router_training.bundle.portfolio={key!r} is not one of {sorted(portfolios['selections'])}")
    sel, specs = portfolios["selections"][key], [CandidateSpec.from_record(c) for c in candidates]
    members = [specs[i] for i in sel["greedy"][: portfolios["k"]]]
    encoders = list(dict.fromkeys([*encoders_used(members), *p.encoders]))
    sets = Corpora.from_json(corpora)
    names = sets.names_for(sets.datasets if key == ALL else [key])
    corpus, embeddings = _served_corpus(sets, names, encoders, cache, scoring)
    routed = router_metrics["datasets"].get(key, {})
    selection = {
        "greedy_train_values": sel["greedy_train_values"][: portfolios["k"]],
        "certificate": sel["certificate"],
        "n_train": sel["n_train"],
        "test_best_of_l": {name: routed[name]["best_of_l"] for name in ROUTERS if name in routed},
        "corpus": sets.describe(),
    }
    bundle = PortfolioBundle(
        name=key, corpus=corpus, members=members, router=routers[key],
        scoring=scoring.model_dump(include={"num_docs", "prefilter_depth", "bm25_base", "graph_max_degree", "encoders"}),
        routing={"text_features": p.hasher().to_dict(), "encoders": p.encoders},
        embeddings=embeddings, default_l=min(p.bundle.default_l, len(members)), selection=selection,
    )
    logger.info("bundle %r: %d members, %d passages (corpus %s), encoders %s", key, bundle.k, len(bundle.corpus),
                corpus.fingerprint, encoders)
    return bundle
