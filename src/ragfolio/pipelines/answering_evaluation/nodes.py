"""Nodes of ``answering_evaluation``: answer test questions with every system, summarise, plot."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from ragfolio.core.answer_eval import SYSTEMS, SystemRunner, summarize
from ragfolio.core.answering import EMBEDDED_LLM, Answerer, make_backend
from ragfolio.core.cache import ArrayCache
from ragfolio.core.corpora import Corpora
from ragfolio.core.data import Question
from ragfolio.core.features import TextHasher
from ragfolio.core.pool import CandidateSpec
from ragfolio.core.rag import AdaptiveRAG
from ragfolio.core.routing.base import RouterProtocol
from ragfolio.core.runners import CorpusRunners, PoolSettings
from ragfolio.core.utility_index import row_questions, split_rows
from ragfolio.core.vendi_rag import VendiRAG
from ragfolio.plotting import subplots

logger = logging.getLogger(__name__)


class AnsweringEvaluationParams(BaseModel):
    """``answering_evaluation`` parameters (conf/base/parameters_answering_evaluation.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_questions_per_dataset: int = Field(10, ge=1)
    datasets: list[str] | None = None
    member_timeout_s: float = Field(30.0, gt=0)
    llm: dict[str, Any] = Field(default_factory=lambda: dict(EMBEDDED_LLM))
    answerer: dict[str, Any] = Field(default_factory=dict)
    vendi_rag: dict[str, Any] = Field(default_factory=dict)
    seed: int = 42


def _test_questions(
    questions: list[dict[str, Any]], utility_index: dict[str, Any], dataset: str, n: int, seed: int
) -> list[Question]:
    """A seeded sample of at most ``n`` of the dataset's test questions (the router never saw them)."""
    qs = row_questions(questions, utility_index, dataset)
    test = split_rows(utility_index, dataset, "test")
    chosen = np.sort(np.random.default_rng(seed).permutation(test)[:n])
    return [qs[i] for i in chosen]


def answer_test_questions(
    questions: list[dict[str, Any]], corpora: dict[str, Any], candidates: list[dict[str, Any]],
    utility_index: dict[str, Any], portfolios: dict[str, Any], routers: dict[str, RouterProtocol], cache: ArrayCache,
    pool_settings: dict[str, Any], router_features: dict[str, Any], params: dict[str, Any],
) -> pd.DataFrame:
    """Answer each dataset's sampled test questions with every system; one row per question and system.

    Each dataset uses its own portfolio and router over the corpus it retrieved from; datasets that
    share a corpus share one runner, configured as candidate scoring ran it (``pool_settings``); the
    routers read the features router training built (``router_features``). The corpus parts
    (embeddings) load from the retrieval cache; per-query work runs afresh and is not written back,
    so latencies are real.
    """
    p = AnsweringEvaluationParams(**params)
    settings = PoolSettings.from_dict(pool_settings)
    hasher, encoders = TextHasher.from_dict(router_features["text_features"]), router_features["encoders"]
    specs = [CandidateSpec.from_record(c) for c in candidates]
    answerer = Answerer(make_backend(p.llm), **p.answerer)
    rows = []
    sets = Corpora.from_json(corpora)
    unknown = set(p.datasets or []) - set(sets.datasets)
    if unknown:
        raise ValueError(f"answering_evaluation.datasets {sorted(unknown)} are not among the datasets with a corpus "
                         f"{sorted(sets.datasets)}")
    runners = CorpusRunners(sets, cache.reader(), settings)
    for dataset in sets.datasets:
        if p.datasets is not None and dataset not in p.datasets:
            continue
        sel, router, runner = portfolios["selections"][dataset], routers[dataset], runners.for_dataset(dataset)
        members = [specs[i] for i in sel["greedy"][: portfolios["k"]]]
        rag = AdaptiveRAG(runner, members, router, hasher, encoders, answerer, timeout_s=p.member_timeout_s)
        vendi = VendiRAG(answerer, runner, num_docs=settings.num_docs, **p.vendi_rag)
        systems = SystemRunner(rag, specs[sel["top_by_average"][0]], vendi)
        sample = _test_questions(questions, utility_index, dataset, p.max_questions_per_dataset, p.seed)
        runner.prepare([*members, systems.single_best], ["warm-up query"])  # build indexes outside the timings
        for q in tqdm(sample, desc=f"{dataset} answering", unit="q"):
            rows += [a.record(q.id, dataset, q.answers, runner.texts) for a in systems.run(q.question)]
        rag.close()
    return pd.DataFrame(rows)


def summarize_answers(answers: pd.DataFrame) -> dict[str, Any]:
    """``datasets.<dataset | all>.<system>.{em, f1, latency_ms_mean, latency_ms_p95, tokens_mean, ...}``."""
    records = answers.to_dict(orient="records")
    for r in records:  # pandas turns None into NaN
        r["fallback"] = None if r["fallback"] is None or r["fallback"] != r["fallback"] else bool(r["fallback"])
    per = summarize(records)
    datasets: dict[str, Any] = {**per, "all": summarize([{**r, "dataset": "all"} for r in records])["all"]}
    report = {"systems": list(SYSTEMS), "datasets": datasets}
    lines = [f"{'dataset':<18}{'system':<15}{'n':>4}{'EM':>7}{'F1':>7}{'ans.rec':>8}{'ms mean':>9}{'ms p95':>9}{'tokens':>8}"]
    for dataset, systems in datasets.items():
        for system, m in systems.items():
            lines.append(
                f"{dataset:<18}{system:<15}{m['n']:>4}{m['em']:>7.3f}{m['f1']:>7.3f}{m['answer_recall']:>8.3f}"
                f"{m['latency_ms_mean']:>9.0f}{m['latency_ms_p95']:>9.0f}{m['tokens_mean']:>8.0f}"
            )
    logger.info("answering on test questions\n%s", "\n".join(lines))
    return report


def plot_em_vs_tokens(metrics: dict[str, Any]) -> Figure:
    """EM against mean tokens per query, one point per system, one panel per dataset."""
    keys = list(metrics["datasets"])
    fig, axes = subplots(1, len(keys), figsize=(4.2 * len(keys), 3.6))
    for ax, key in zip(axes[0], keys, strict=True):
        for system, m in metrics["datasets"][key].items():
            ax.scatter(m["tokens_mean"], m["em"], s=30)
            ax.annotate(system, (m["tokens_mean"], m["em"]), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_title(f"{key} (n={next(iter(metrics['datasets'][key].values()))['n']})")
        ax.set_xlabel("tokens per query (mean)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("exact match")
    fig.tight_layout()
    return fig


def em_vs_tokens_table(metrics: dict[str, Any]) -> pd.DataFrame:
    """Rows ``(system, tokens_mean, em, f1, latency_ms_mean)`` over every dataset (``all``).

    The data behind ``em_vs_tokens.png``, for ``dvc plots show`` (a scatter of ``em`` on ``tokens_mean``).
    """
    systems = metrics["datasets"]["all"]
    return pd.DataFrame([
        {"system": system, **{key: m[key] for key in ("tokens_mean", "em", "f1", "latency_ms_mean")}}
        for system, m in systems.items()
    ], columns=["system", "tokens_mean", "em", "f1", "latency_ms_mean"])
