"""Retrieval features for routing: what the shared first stage and each member's own list say about a query.

Two blocks, both computed from rankings the members build on anyway (so routing on them adds no
retrieval, only this arithmetic):

* ``first_stage`` ``(n, d_f)``, per query, from the shared first-stage rankings (bases ``bm25`` and
  ``dense:<encoder>`` of :class:`~ragfolio.core.retrieval.running.pool_runner.PoolRunner`) and the question's text;
  column names in :meth:`RetrievalFeaturizer.first_stage_names`:

  - ``<base>.top1``, ``<base>.margin2``, ``<base>.margin5``: the top score, and top-1 minus
    top-2 and top-1 minus top-5 scores (a confident first stage has a clear winner);
  - ``<base>.entity_coverage``: share of the question's capitalised spans (:func:`capitalised_spans`)
    that a title of the top ``num_docs`` passages covers (:func:`covers`); 0 without spans;
  - ``<base>.titles_in_question``: share of the top ``num_docs`` passages whose title the
    question mentions (every title word occurs in the question);
  - ``<base>.seed_degree``: mean passage-graph degree of the top ``num_docs`` passages;
  - ``<base>.seed_links``: share of pairs of the top ``num_docs`` passages linked in the graph;
  - ``agree.<a>~<b>.overlap``: ``|top_n(a) & top_n(b)| / n`` for every pair of bases, ``n =
    agreement_depth``; ``agree.<a>~<b>.rank_corr``: Spearman correlation of the two top-n lists
    over their union, a passage missing from a list ranked ``n`` (0-based), 1 for equal lists;
  - ``form.*``: the question's form: a one-hot of its first wh-word (``what, which, who
    (whom, whose), when, where, why, how``), ``yes_no`` (starts with an auxiliary verb) or
    ``other``; ``n_words``; ``n_spans`` (capitalised spans); 0/1 cues ``or``, ``both``, ``same``,
    ``comparative`` (more, older, earlier, first, before, ...) and ``number`` (a digit).

* ``members`` ``(n, k, d_m)``, per query and portfolio member, from the member's own
  ``(n, num_docs)`` result; names in :meth:`RetrievalFeaturizer.member_names`:

  - ``top1``, ``mean``: the member's top score and mean score over its list (raw: members' scales
    differ, so routers normalise them per member, e.g. by rank against the member's train values);
  - ``overlap_members``: mean over the other members of ``|L_j & L_j'| / num_docs``;
    ``unique``: share of its passages no other member returned;
  - ``overlap.<base>``: ``|L_j & top_num_docs(base)| / num_docs`` for every base;
  - ``entity_coverage``, ``titles_in_question``, ``seed_degree``, ``seed_links``: as above, over
    its list; ``distinct_titles``: distinct titles in its list / ``num_docs``;
  - with ``judge`` (list judgements, when candidate scoring trained a cross-encoder):
    ``judge.max``, ``judge.mean``: the highest and the mean cross-encoder probability that a
    passage of its list supports the question; ``judge.coverage``: the share of its ``num_docs``
    places holding a passage judged at least 0.5. The only features that read each (question,
    passage) pair jointly; they cost one cross-encoder call per query (the k lists' distinct
    passages together).

Non-finite scores (padding) count as 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from itertools import combinations
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.indexes.passage_graph import PassageGraph
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.retrieval.results import RetrievalResult

_WORD = re.compile(r"\w[\w'’\-]*")
STOPWORDS = frozenset(
    "a an and are as at be by did do does for from had has have he her his in is it its of on or she that the "
    "their they this to was were what when where which who whom whose why how with".split()
)
CONNECTORS = frozenset("of the de del della di da du la le von van der y".split())  # inside a name: "Bank of America"
WH_WORDS = {"what": "what", "which": "which", "who": "who", "whom": "who", "whose": "who", "when": "when",
            "where": "where", "why": "why", "how": "how"}
YES_NO = frozenset("is are was were did do does can could has have had will would should".split())
COMPARATIVE = frozenset(
    "more most less least fewer older oldest younger youngest earlier earliest later latest first last longer "
    "shorter higher lower larger smaller bigger before after".split()
)
FORM_NAMES = (
    *(f"form.wh_{w}" for w in ("what", "which", "who", "when", "where", "why", "how")), "form.yes_no", "form.other",
    "form.n_words", "form.n_spans", "form.or", "form.both", "form.same", "form.comparative", "form.number",
)
LIST_NAMES = ("entity_coverage", "titles_in_question", "seed_degree", "seed_links")
JUDGE_NAMES = ("judge.max", "judge.mean", "judge.coverage")
JUDGED = 0.5  # a passage the cross-encoder judges at least this likely to support the question counts as covered
CROSS_MEMBER_NAMES = ("overlap_members", "unique")  # the member features that read the other members' lists
CROSS_MEMBER_COLUMNS = (2, 3)  # their columns in RetrievalFeaturizer.member_names()


class FirstStageParts(Protocol):
    """What the features read from a pool runner (:class:`~ragfolio.core.retrieval.running.pool_runner.PoolRunner` is one)."""

    titles: Sequence[str]
    num_docs: int

    def base(self, name: str, queries: Sequence[str]) -> RetrievalResult: ...

    def run(self, candidate: CandidateSpec, queries: Sequence[str]) -> RetrievalResult: ...

    def graph(self) -> PassageGraph: ...


# The cross-encoder's (n, d) probabilities of each query with the corpus rows doc_ids (-inf on -1).
Judge = Callable[[Sequence[str], npt.NDArray[np.int64]], npt.NDArray[np.float32]]


def words(text: str) -> list[str]:
    """Case-folded words of ``text``."""
    return [w.casefold() for w in _WORD.findall(text)]


def key_words(text: str) -> frozenset[str]:
    """The words of ``text`` that are not stopwords (what makes a title or a name)."""
    return frozenset(w for w in words(text) if w not in STOPWORDS)


def capitalised_spans(question: str) -> list[str]:
    """Maximal runs of capitalised words, joined through connectors ("Bank of America").

    The question's first word is skipped when it is a stopword, wh-word or auxiliary (capitalised
    only because it starts the sentence).
    """
    tokens = _WORD.findall(question)
    spans: list[str] = []
    run: list[str] = []
    for i, token in enumerate(tokens):
        lower = token.casefold()
        capital = token[0].isupper() and not (i == 0 and (lower in STOPWORDS or lower in YES_NO or lower in WH_WORDS))
        if capital:
            run.append(token)
        elif run and lower in CONNECTORS:
            run.append(token)
            continue
        if not capital and run:
            while run and run[-1].casefold() in CONNECTORS:
                run.pop()
            spans.append(" ".join(run))
            run = []
    while run and run[-1].casefold() in CONNECTORS:
        run.pop()
    if run:
        spans.append(" ".join(run))
    return [s for s in spans if key_words(s)]


def covers(span: frozenset[str], title: frozenset[str]) -> bool:
    """Whether a title covers a span (both as :func:`key_words`): one's words contain the other's."""
    return bool(span) and bool(title) and (span <= title or title <= span)


def question_form(questions: Sequence[str]) -> npt.NDArray[np.float32]:
    """``(n, len(FORM_NAMES))`` form features of each question (see the module docstring)."""
    out = np.zeros((len(questions), len(FORM_NAMES)), dtype=np.float32)
    col = {name: i for i, name in enumerate(FORM_NAMES)}
    for q, text in enumerate(questions):
        ws = words(text)
        wh = next((WH_WORDS[w] for w in ws if w in WH_WORDS), None)
        kind = f"form.wh_{wh}" if wh else "form.yes_no" if ws and ws[0] in YES_NO else "form.other"
        out[q, col[kind]] = 1.0
        out[q, col["form.n_words"]] = len(ws)
        out[q, col["form.n_spans"]] = len(capitalised_spans(text))
        out[q, col["form.or"]] = "or" in ws
        out[q, col["form.both"]] = "both" in ws
        out[q, col["form.same"]] = "same" in ws
        out[q, col["form.comparative"]] = any(w in COMPARATIVE for w in ws)
        out[q, col["form.number"]] = any(c.isdigit() for c in text)
    return out


def _finite(x: npt.NDArray[Any]) -> npt.NDArray[np.float32]:
    return np.where(np.isfinite(x), x, 0.0).astype(np.float32)


def rank_correlation(a: Sequence[int], b: Sequence[int]) -> float:
    """Spearman correlation of two rankings over their union (a missing item ranks ``len``); 1 if equal."""
    union = list(dict.fromkeys([*a, *b]))
    pos_a, pos_b = {d: i for i, d in enumerate(a)}, {d: i for i, d in enumerate(b)}
    ra = np.array([pos_a.get(d, len(a)) for d in union], dtype=np.float64)
    rb = np.array([pos_b.get(d, len(b)) for d in union], dtype=np.float64)
    if list(a) == list(b):
        return 1.0
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


class _Corpus:
    """What the list features read about the corpus: title words (memoised) and graph degrees."""

    def __init__(self, titles: Sequence[str], graph: PassageGraph | None) -> None:
        self.titles, self.graph = titles, graph
        self._title_words: dict[int, frozenset[str]] = {}
        self.degrees = (np.diff(graph.adjacency.indptr).astype(np.float32) if graph is not None
                        else np.zeros(len(titles), dtype=np.float32))

    def title_words(self, row: int) -> frozenset[str]:
        if row not in self._title_words:
            self._title_words[row] = key_words(self.titles[row])
        return self._title_words[row]

    def list_features(self, question: _Question, rows: Sequence[int]) -> tuple[float, float, float, float]:
        """(entity_coverage, titles_in_question, seed_degree, seed_links) of one list of corpus rows."""
        rows = [r for r in rows if r >= 0]
        if not rows:
            return 0.0, 0.0, 0.0, 0.0
        titles = [self.title_words(r) for r in rows]
        spans = question.spans
        coverage = float(np.mean([any(covers(s, t) for t in titles) for s in spans])) if spans else 0.0
        in_question = float(np.mean([bool(t) and t <= question.words for t in titles]))
        # Passages added while serving (rows past the graph's, ragfolio.core.corpus.live_corpus) have no
        # links until the next run: degree 0, and no links to the others.
        linked = [r for r in rows if r < len(self.degrees)]
        unlinked = len(rows) - len(linked)
        degree = float(np.concatenate([self.degrees[linked], np.zeros(unlinked, np.float32)]).mean()) \
            if unlinked else float(self.degrees[rows].mean())
        links = 0.0
        if self.graph is not None and len(rows) > 1:
            sub = self.graph.adjacency[linked][:, linked]
            links = float(sub.nnz / (len(rows) * (len(rows) - 1)))
        return coverage, in_question, degree, links


@dataclass(frozen=True)
class _Question:
    """A question's key words and the key words of each of its capitalised spans."""

    words: frozenset[str]
    spans: tuple[frozenset[str], ...]

    @classmethod
    def of(cls, text: str) -> _Question:
        return cls(key_words(text), tuple(key_words(s) for s in capitalised_spans(text)))


@dataclass(frozen=True)
class RetrievalInputs:
    """Retrieval features of every utility-matrix row, in row order, as router training computed them.

    Attributes:
        first_stage: Per dataset, ``(n, d_f)`` first-stage features.
        members: Per portfolio and dataset, ``(n, k, d_m)`` features of each member's list.
        names: Column names per block (``first_stage``, ``members``).
    """

    first_stage: Mapping[str, npt.NDArray[np.float32]]
    members: Mapping[str, Mapping[str, npt.NDArray[np.float32]]]
    names: Mapping[str, list[str]]


@dataclass(frozen=True)
class RetrievalFeaturizer:
    """Computes the ``first_stage`` and ``members`` blocks (see the module docstring).

    Attributes:
        encoders: Encoders whose dense first stage (``dense:<encoder>``) is read, besides ``bm25``.
        num_docs: Passages per list that the list features look at (a member's whole list).
        agreement_depth: ``n`` of the first-stage agreement features.
        judge: Add the list judgements (``judge.*``) to the member features; they read the pool
            runner's cross-encoder (:meth:`members`' ``judge``).
    """

    encoders: tuple[str, ...]
    num_docs: int = 4
    agreement_depth: int = 10
    judge: bool = False

    def __post_init__(self) -> None:
        if self.num_docs < 1 or self.agreement_depth < 1:
            raise ValueError(f"num_docs={self.num_docs} and agreement_depth={self.agreement_depth} must be >= 1")

    @property
    def bases(self) -> list[str]:
        """The first-stage rankings read: ``bm25``, then ``dense:<encoder>`` per encoder."""
        return ["bm25", *(f"dense:{e}" for e in self.encoders)]

    def first_stage_names(self) -> list[str]:
        per_base = ("top1", "margin2", "margin5", *LIST_NAMES)
        pairs = [f"agree.{a}~{b}.{m}" for a, b in combinations(self.bases, 2) for m in ("overlap", "rank_corr")]
        return [f"{b}.{m}" for b in self.bases for m in per_base] + pairs + list(FORM_NAMES)

    def member_names(self) -> list[str]:
        return ["top1", "mean", *CROSS_MEMBER_NAMES, *(f"overlap.{b}" for b in self.bases),
                *LIST_NAMES, "distinct_titles", *(JUDGE_NAMES if self.judge else ())]

    def fetch_bases(
        self, runner: FirstStageParts, questions: Sequence[str], executor: Executor | None = None
    ) -> dict[str, RetrievalResult]:
        """The first-stage rankings of ``questions`` (from the runner's cache when it holds them),
        each base in ``executor``'s threads when given (they are independent: BM25 and one dense
        ranking per encoder, whose query encoders then run side by side), else one after another."""
        if executor is None:
            return {name: runner.base(name, questions) for name in self.bases}
        futures = {name: executor.submit(runner.base, name, questions) for name in self.bases}
        return {name: future.result() for name, future in futures.items()}

    def first_stage(
        self, questions: Sequence[str], bases: Mapping[str, RetrievalResult], titles: Sequence[str],
        graph: PassageGraph | None,
    ) -> npt.NDArray[np.float32]:
        """``(n, len(first_stage_names()))`` float32 first-stage features.

        Args:
            questions: The n question texts.
            bases: The rankings of :attr:`bases`, each ``(n, depth)`` (depth >= 1).
            titles: Title of every corpus row.
            graph: The corpus's passage graph (None: degree and link features are 0).
        """
        corpus, n, asked = _Corpus(titles, graph), len(questions), [_Question.of(q) for q in questions]
        columns: list[npt.NDArray[np.float32]] = []
        for name in self.bases:
            result = bases[name]
            if result.doc_ids.shape[0] != n:
                raise ValueError(f"base {name!r} has {result.doc_ids.shape[0]} rows for {n} questions")
            s = _finite(result.scores)
            columns += [s[:, 0], s[:, 0] - s[:, min(1, s.shape[1] - 1)], s[:, 0] - s[:, min(4, s.shape[1] - 1)]]
            lists = np.array([corpus.list_features(q, ids[: self.num_docs])
                              for q, ids in zip(asked, result.doc_ids.tolist(), strict=True)], dtype=np.float32)
            columns += list(lists.reshape(n, len(LIST_NAMES)).T)
        depth = self.agreement_depth
        for a, b in combinations(self.bases, 2):
            tops = [[[d for d in row[:depth] if d >= 0] for row in bases[x].doc_ids.tolist()] for x in (a, b)]
            columns.append(np.array([len(set(x) & set(y)) / depth for x, y in zip(*tops, strict=True)], np.float32))
            columns.append(np.array([rank_correlation(x, y) for x, y in zip(*tops, strict=True)], np.float32))
        out = np.concatenate([np.stack(columns, axis=1).reshape(n, -1), question_form(questions)], axis=1)
        return out.astype(np.float32)

    def members(
        self, questions: Sequence[str], results: Sequence[RetrievalResult], bases: Mapping[str, RetrievalResult],
        titles: Sequence[str], graph: PassageGraph | None, judge: Judge | None = None,
    ) -> npt.NDArray[np.float32]:
        """``(n, k, len(member_names()))`` float32 features of each of the k members' results.

        Args:
            questions: The n question texts.
            results: Each member's ``(n, num_docs)`` result, in portfolio order.
            bases: The rankings of :attr:`bases`.
            titles, graph: As in :meth:`first_stage`.
            judge: The cross-encoder's probabilities of (question, corpus row) pairs (a
                :class:`~ragfolio.core.routing.features.list_judgements.ListJudge` of the pool
                runner), read only with :attr:`judge`.

        Raises:
            ValueError: :attr:`judge` is set and ``judge`` is None.
        """
        corpus, n, k = _Corpus(titles, graph), len(questions), len(results)
        asked = [_Question.of(q) for q in questions]
        out = np.zeros((n, k, len(self.member_names())), dtype=np.float32)
        lists = [[[d for d in row[: self.num_docs] if d >= 0] for row in r.doc_ids.tolist()] for r in results]
        base_tops = [[set(row[: self.num_docs]) for row in bases[b].doc_ids.tolist()] for b in self.bases]
        for j, result in enumerate(results):
            if result.doc_ids.shape[0] != n:
                raise ValueError(f"member {j} has {result.doc_ids.shape[0]} rows for {n} questions")
            s = _finite(result.scores[:, : self.num_docs])
            out[:, j, 0], out[:, j, 1] = s[:, 0], s.mean(axis=1)
            for q in range(n):
                mine = set(lists[j][q])
                others = [set(lists[i][q]) for i in range(k) if i != j]
                seen: set[int] = set().union(*others)
                row = [
                    float(np.mean([len(mine & o) / self.num_docs for o in others])) if others else 0.0,
                    len(mine - seen) / self.num_docs,
                    *(len(mine & top[q]) / self.num_docs for top in base_tops),
                    *corpus.list_features(asked[q], lists[j][q]),
                    len({corpus.title_words(r) for r in mine}) / self.num_docs,
                ]
                out[q, j, 2 : 2 + len(row)] = row
        if self.judge:
            out[:, :, -len(JUDGE_NAMES):] = self.judgements(questions, results, judge)
        return out

    def judgements(
        self, questions: Sequence[str], results: Sequence[RetrievalResult], judge: Judge | None
    ) -> npt.NDArray[np.float32]:
        """``(n, k, 3)`` ``judge.max``, ``judge.mean``, ``judge.coverage`` of each member's list (0 for an empty one)."""
        if judge is None:
            raise ValueError("the featurizer adds list judgements (judge=True): pass the runner's judge")
        ids = np.concatenate([r.doc_ids[:, : self.num_docs] for r in results], axis=1)  # (n, k * num_docs)
        probs = np.asarray(judge(questions, ids), dtype=np.float32).reshape(len(questions), len(results), -1)
        held = np.isfinite(probs)
        count = held.sum(axis=2)
        best = np.where(held, probs, -np.inf).max(axis=2)
        mean = np.where(held, probs, 0.0).sum(axis=2) / np.maximum(count, 1)
        coverage = (held & (probs >= JUDGED)).sum(axis=2) / self.num_docs
        return np.stack([np.where(count > 0, best, 0.0), mean, coverage], axis=2).astype(np.float32)

    def compute(
        self, runner: FirstStageParts, questions: Sequence[str], members: Sequence[CandidateSpec],
        judge: Judge | None = None,
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """Both blocks for ``questions``, reading the rankings from ``runner`` (and the list
        judgements from ``judge``, with :attr:`judge`): ``(first_stage, members)``."""
        bases = self.fetch_bases(runner, questions)
        graph = runner.graph()
        results = [runner.run(spec, questions) for spec in members]
        return (self.first_stage(questions, bases, runner.titles, graph),
                self.members(questions, results, bases, runner.titles, graph, judge))
