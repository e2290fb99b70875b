"""A team's unlabelled query log turned into labelled questions by judged pooling.

For each logged question the pool's top passages (:mod:`~ragfolio.core.synthesis.pooling`) are
judged one by one by the reader (:class:`~ragfolio.core.synthesis.verdicts.Judge`); the passages judged
relevant become the question's supporting contexts, the others its non-supporting ones, and a
question with no relevant passage is dropped (it has no support to score retrieval against).

Every verdict is stored as it is given (:class:`~ragfolio.core.synthesis.store.RecordStore`) under a
key naming the passage, the question's text and the judge's settings (prompt version, passage
words, generation limit, the backend's identity), so a stopped run resumes where it stopped and a
rerun makes no call. ``question_synthesis.log`` holds the settings (:class:`LogSettings`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

from tqdm.auto import tqdm

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import UNION, Corpora
from ragfolio.core.data.passages import Corpus
from ragfolio.core.data.sources import LOG, read_log
from ragfolio.core.llm.chat import ChatBackend
from ragfolio.core.synthesis.pooling import Pool, PoolingSettings, pool_passages
from ragfolio.core.synthesis.store import RecordStore
from ragfolio.core.synthesis.verdicts import STYLES, Judge

logger = logging.getLogger(__name__)


class LogParams(Protocol):
    """What judging reads of ``question_synthesis``'s parameters (``SynthesisParams``)."""

    @property
    def log(self) -> Mapping[str, Any]: ...  # this path's settings (:class:`LogSettings`)

    @property
    def llm(self) -> Mapping[str, Any]: ...  # the judge's backend config

    @property
    def progress(self) -> bool: ...


@dataclass(frozen=True)
class LogSettings:
    """``question_synthesis.log``: how a query log is pooled and judged.

    Attributes:
        pooling: The retrievers and depth of the pool (keys ``retrievers``, ``depth``, ``encoders``, ``bm25``).
        verdict: The judge's reply (:data:`~ragfolio.core.synthesis.verdicts.STYLES`): ``grade``
            (0-3, relevant from ``min_grade``) or ``yes_no``.
        min_grade: The lowest ``grade`` that counts as relevant (2: a fact on the way to the answer).
        max_passage_words: Words of each passage shown to the judge.
        max_tokens: Generation limit of a verdict (``{"grade": 2}`` is about 6 tokens).
    """

    pooling: PoolingSettings = PoolingSettings()
    verdict: str = "grade"
    min_grade: int = 2
    max_passage_words: int = 100
    max_tokens: int = 16

    @classmethod
    def from_dict(cls, log: Mapping[str, Any]) -> LogSettings:
        """Read ``question_synthesis.log``; unset keys take the defaults.

        Raises:
            ValueError: An unknown key (named, with the known ones), or a bad value.
        """
        pool_keys = {f.name for f in fields(PoolingSettings)}
        known = pool_keys | {f.name for f in fields(cls)} - {"pooling"}
        unknown = sorted(set(log) - known)
        if unknown:
            raise ValueError(f"question_synthesis.log has unknown key(s) {unknown}; known: {sorted(known)}")
        pooling: dict[str, Any] = {k: tuple(v) if k == "retrievers" else v for k, v in log.items() if k in pool_keys}
        rest = {k: v for k, v in log.items() if k not in pool_keys}
        settings = cls(PoolingSettings(**pooling), **rest)
        if settings.max_passage_words < 1 or settings.max_tokens < 1:
            raise ValueError(f"max_passage_words={settings.max_passage_words} and max_tokens={settings.max_tokens} "
                             "must be >= 1")
        if settings.verdict not in STYLES or not 1 <= settings.min_grade <= 3:
            raise ValueError(f"verdict={settings.verdict!r} must be one of {STYLES} and min_grade={settings.min_grade} "
                             "in 1..3")
        return settings


@dataclass
class JudgeStats:
    """What judging cost: pairs judged (``made`` by a call, ``reused`` from the store), replies that
    were not a verdict, tokens and LLM seconds of the calls made."""

    pairs: int = 0
    made: int = 0
    reused: int = 0
    unparsed: int = 0
    tokens: int = 0
    llm_s: float = 0.0


def judge_pool(judge: Judge, log: Sequence[Mapping[str, str]], corpus: Corpus, pool: Pool, store: RecordStore,
               *, progress: bool = True) -> tuple[list[dict[str, Any]], JudgeStats]:
    """Every logged question with its pooled passages judged, the verdicts stored as they are given.

    Args:
        log: ``[{"id", "question"}, ...]`` (:func:`~ragfolio.core.data.sources.read_log`).
        pool: ``log``'s pool, question by question.

    Returns:
        ``(rows, stats)``: one row per logged question, in log order, in the row format
        (:mod:`ragfolio.core.data.records`): its judged passages as contexts, ``is_supporting`` the
        verdict (no verdict: False), in pool order; plus ``"judged": {"pooled", "relevant",
        "found_by": {passage id: [retriever, ...]}}``. A row may have no supporting context.
    """
    stats = JudgeStats()
    pairs = [(q["question"], corpus.ids[row]) for q, rows in zip(log, pool.rows, strict=True) for row in rows]
    missing = [(question, pid) for question, pid in pairs if store.get(judge.key(question, pid)) is None]
    stats.pairs, stats.reused = len(pairs), len(pairs) - len(missing)
    rows_of = corpus.row_of()
    for question, pid in tqdm(missing, desc="judging pooled passages", unit="pair", disable=not progress):
        rec = judge.judge(question, pid, corpus.titles[rows_of[pid]], corpus.texts[rows_of[pid]])
        store.put(rec)
        stats.made += 1
        stats.tokens += rec["prompt_tokens"] + rec["completion_tokens"]
        stats.llm_s += rec["ms"] / 1000
    rows = []
    for q, pooled, found_by in zip(log, pool.rows, pool.found_by, strict=True):
        verdicts = [store.get(judge.key(q["question"], corpus.ids[row])) for row in pooled]
        stats.unparsed += sum(v is None or v["grade"] is None for v in verdicts)
        contexts = [{"title": corpus.titles[row], "text": corpus.texts[row], "is_supporting": judge.relevant(v)}
                    for row, v in zip(pooled, verdicts, strict=True)]
        relevant = sum(judge.relevant(v) for v in verdicts)
        rows.append({"id": q["id"], "dataset": LOG, "question": q["question"], "answers": [], "type": None,
                     "contexts": contexts,
                     "judged": {"pooled": len(pooled), "relevant": relevant,
                                "found_by": {corpus.ids[r]: list(by) for r, by in zip(pooled, found_by, strict=True)}}})
    return rows, stats


def judge_questions(log: Sequence[Mapping[str, str]], corpus: Corpus, store: RecordStore, p: LogParams, *,
                    backend: ChatBackend | None = None, cache: ArrayCache | None = None
                    ) -> tuple[list[dict[str, Any]], JudgeStats]:
    """:func:`judge_pool` on ``log``'s pool, with the settings of ``p.log`` (:class:`LogSettings`).

    Args:
        backend: The judge; None: :func:`~ragfolio.core.llm.backends.make_backend` of ``p.llm``.
            Verdict keys name ``p.llm``'s identity either way.
        cache: Where the pool's passage embeddings and first-stage rankings persist (the run's
            ``retrieval_cache`` shares MiniLM's passage embeddings with ``candidate_scoring``); None: nowhere.
    """
    from ragfolio.core.llm.backends import backend_identity, make_backend  # an LLM engine only where judged

    settings = LogSettings.from_dict(p.log)
    cache = cache if cache is not None else ArrayCache(".", enabled=False)
    pool = pool_passages(corpus, [q["question"] for q in log], settings.pooling, cache)
    judge = Judge(backend or make_backend(p.llm), style=settings.verdict, min_grade=settings.min_grade,
                  max_passage_words=settings.max_passage_words, max_tokens=settings.max_tokens,
                  identity=backend_identity(p.llm))
    return judge_pool(judge, log, corpus, pool, store, progress=p.progress)


def judge_log(log_file: str, corpora: Corpora, store: RecordStore, p: LogParams, *,
              backend: ChatBackend | None = None, cache: ArrayCache | None = None
              ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The questions of ``log_file`` (:func:`~ragfolio.core.data.sources.read_log`) with judged
    support from the union corpus; those with no passage judged relevant are dropped.

    ``backend`` and ``cache`` are :func:`judge_questions`'.

    Returns:
        ``(rows, report)``: the kept questions in the row format, in log order, and
        :func:`judging_report`'s report.

    Raises:
        ValueError: ``corpora`` has no union corpus.
    """
    if UNION not in corpora.corpora:
        raise ValueError(f"a query log is judged on the union corpus; corpora are {sorted(corpora.corpora)}")
    log = read_log(log_file)
    rows, stats = judge_questions(log, corpora.corpora[UNION], store, p, backend=backend, cache=cache)
    kept = [row for row in rows if row["judged"]["relevant"]]
    report = judging_report(rows, stats, LogSettings.from_dict(p.log))
    logger.info("judged %d pooled passages for %d logged questions (%d read back): %d kept, %d with no relevant "
                "passage dropped", stats.pairs, len(rows), stats.reused, len(kept), len(rows) - len(kept))
    return kept, report


def judging_report(rows: Sequence[Mapping[str, Any]], stats: JudgeStats, settings: LogSettings) -> dict[str, Any]:
    """A JSON-able report of a judged log: questions read and kept, judgements made and reused, their
    means per question, tokens, LLM seconds and judgements per minute of LLM time."""
    n, kept = len(rows), sum(1 for r in rows if r["judged"]["relevant"])
    minutes = stats.llm_s / 60
    return {"log_questions": n, "kept": kept, "dropped_no_relevant": n - kept,
            "pool": {"retrievers": list(settings.pooling.retrievers), "depth": settings.pooling.depth},
            "verdict": settings.verdict, "min_grade": settings.min_grade if settings.verdict == "grade" else None,
            "judgements": {**asdict(stats), "llm_s": round(stats.llm_s, 2)},
            "per_question": {"judged": _mean([r["judged"]["pooled"] for r in rows]),
                             "relevant": _mean([r["judged"]["relevant"] for r in rows])},
            "judgements_per_minute": round(stats.made / minutes, 2) if minutes else None,
            "seconds_per_judgement": round(stats.llm_s / stats.made, 3) if stats.made else None}


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None
