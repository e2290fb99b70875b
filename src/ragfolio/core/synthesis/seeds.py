"""The passages questions are written from: spread over the corpus, and linked in pairs.

A :class:`Seed` is one kind of question and the corpus rows it is written from. :func:`plan_seeds`
draws them, seeded:

* **spread**: passages are taken round-robin over the corpus's titles in a seeded order, one
  passage of each title before a second of any (:func:`spread_rows`), so a handful of long
  documents does not supply most questions;
* **bridge** pairs link a passage to one whose title it names (:func:`title_links`): the second
  hop is reached through the first, as in HotpotQA's bridge questions; a passage naming no other
  title is paired with its nearest neighbour instead;
* **comparison** pairs are nearest neighbours by TF-IDF cosine with another title
  (:func:`nearest_other_title`): two subjects of one kind (two films, two people) share words.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer

from ragfolio.core.answer_text import normalize_answer
from ragfolio.core.data.passages import Corpus
from ragfolio.core.synthesis.writer_prompts import KINDS, Kind

MAX_TITLE_WORDS: Final = 6  # longer titles are not looked for in texts
MIN_TITLE_CHARS: Final = 4  # nor shorter ones ("US", "Go"): they name too many things


@dataclass(frozen=True)
class Seed:
    """One question to write: its kind and the corpus rows it is written from (first hop first).

    Attributes:
        kind: ``single``, ``bridge`` or ``comparison``.
        rows: Corpus rows of its passages.
        link: How a pair was linked: ``"title"`` (the first names the second's title),
            ``"neighbour"`` (TF-IDF nearest neighbour), or ``""`` for a single passage.
    """

    kind: Kind
    rows: tuple[int, ...]
    link: str = ""

    def key(self, corpus: Corpus) -> str:
        """``kind:id[+id]``: the seed named by its passages' ids, stable across runs."""
        return f"{self.kind}:" + "+".join(corpus.ids[r] for r in self.rows)


def spread_rows(corpus: Corpus, rng: random.Random) -> list[int]:
    """Every corpus row, ordered so that each title's passages come one per round (titles seeded-shuffled)."""
    by_title: dict[str, list[int]] = defaultdict(list)
    for row, title in enumerate(corpus.titles):
        by_title[normalize_answer(title)].append(row)
    groups = list(by_title.values())
    rng.shuffle(groups)
    for group in groups:
        rng.shuffle(group)
    order: list[int] = []
    depth = 0
    while len(order) < len(corpus):
        order += [group[depth] for group in groups if depth < len(group)]
        depth += 1
    return order


def title_index(corpus: Corpus) -> dict[str, list[int]]:
    """Normalised title -> rows, for titles of ``MIN_TITLE_CHARS`` characters and at most ``MAX_TITLE_WORDS`` words."""
    index: dict[str, list[int]] = defaultdict(list)
    for row, title in enumerate(corpus.titles):
        name = normalize_answer(title)
        if len(name) >= MIN_TITLE_CHARS and len(name.split()) <= MAX_TITLE_WORDS:
            index[name].append(row)
    return index


def title_links(corpus: Corpus, row: int, index: Mapping[str, list[int]]) -> list[int]:
    """Rows of other titles whose title occurs, as whole words, in ``row``'s text (longest mention first)."""
    words = normalize_answer(corpus.texts[row]).split()
    own = normalize_answer(corpus.titles[row])
    found: dict[int, int] = {}
    for n in range(MAX_TITLE_WORDS, 0, -1):
        for i in range(len(words) - n + 1):
            name = " ".join(words[i:i + n])
            if name != own:
                for target in index.get(name, ()):
                    found.setdefault(target, n)
    return sorted(found, key=lambda target: (-found[target], target))


class Neighbours:
    """TF-IDF cosine nearest neighbours among the corpus's passages (title and text)."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        texts = [f"{t} {x}" for t, x in zip(corpus.titles, corpus.texts, strict=True)]
        self.matrix = TfidfVectorizer(sublinear_tf=True, stop_words="english", min_df=1).fit_transform(texts)

    def nearest_other_title(self, row: int, k: int = 5) -> list[int]:
        """Up to ``k`` rows nearest ``row`` whose title differs from its title, nearest first."""
        scores = (self.matrix @ self.matrix[row].T).toarray().ravel()
        own = normalize_answer(self.corpus.titles[row])
        order = np.argsort(-scores, kind="stable")
        near = [int(r) for r in order[: 4 * k + 8]
                if scores[r] > 0 and normalize_answer(self.corpus.titles[r]) != own]
        return near[:k]


def kind_sequence(n: int, mix: Mapping[str, float]) -> list[Kind]:
    """``n`` kinds in the proportions of ``mix``: seed ``i`` takes the kind furthest behind its share
    after ``i`` seeds (ties in :data:`~ragfolio.core.synthesis.writer_prompts.KINDS` order). Each prefix keeps
    the proportions, and the first ``m`` kinds are the same for every ``n >= m``, so a run that asks
    for more questions plans the seeds of a run that asked for fewer, and reuses them.

    Raises:
        ValueError: ``mix`` names an unknown kind, has a negative share or sums to zero.
    """
    unknown = sorted(set(mix) - set(KINDS))
    if unknown or any(v < 0 for v in mix.values()) or not sum(mix.values()):
        raise ValueError(f"mix={dict(mix)} must give non-negative shares, not all zero, to kinds among {KINDS}")
    share = {k: mix.get(k, 0.0) / sum(mix.values()) for k in KINDS}
    counts = dict.fromkeys(KINDS, 0)
    kinds: list[Kind] = []
    for i in range(n):
        kind = max(KINDS, key=lambda k: (share[k] * (i + 1) - counts[k], -KINDS.index(k)))
        counts[kind] += 1
        kinds.append(kind)
    return kinds


def plan_seeds(corpus: Corpus, n: int, mix: Mapping[str, float], seed: int) -> list[Seed]:
    """``n`` seeds of the kinds of :func:`kind_sequence`, their first passages spread over the corpus
    (:func:`spread_rows`); no passage starts two seeds. The plan for ``n`` begins with the plan for
    any smaller ``n``.

    Pairs: ``bridge`` links by a title the first passage names, else its nearest neighbour;
    ``comparison`` takes the nearest neighbour of another title. A first passage that has no
    partner is skipped. Fewer than ``n`` seeds come back only when the corpus runs out.
    """
    kinds = kind_sequence(n, mix)
    order = spread_rows(corpus, random.Random(seed))
    index = title_index(corpus) if "bridge" in kinds else {}
    neighbours = Neighbours(corpus) if {"bridge", "comparison"} & set(kinds) else None
    seeds: list[Seed] = []
    rows = iter(order)
    for kind in kinds:
        for row in rows:
            if (made := _seed(kind, row, corpus, index, neighbours)) is not None:
                seeds.append(made)
                break
    return seeds


def _seed(kind: Kind, row: int, corpus: Corpus, index: Mapping[str, list[int]],
          neighbours: Neighbours | None) -> Seed | None:
    if kind == "single":
        return Seed(kind, (row,))
    assert neighbours is not None
    if kind == "bridge" and (linked := title_links(corpus, row, index)):
        return Seed(kind, (row, linked[0]), "title")
    near = neighbours.nearest_other_title(row, k=1)
    return Seed(kind, (row, near[0]), "neighbour") if near else None


def passages_of(corpus: Corpus, rows: Sequence[int]) -> list[tuple[str, str]]:
    """``(title, text)`` of ``rows``."""
    return [(corpus.titles[r], corpus.texts[r]) for r in rows]
