"""Questions on which BM25 and a passage-graph walk win on different, learnable halves.

Made-up words keep each question's passages apart from every other question's; two kinds of
question, told apart by their first word:

* ``What ...`` (direct): both supporting passages share the question's rare words, so BM25's top
  two are the gold pair; both mention a distractor's title, so a one-seed graph walk puts that
  distractor second (support recall 1 for BM25, 1/2 for the walk).
* ``Who ...`` (bridge): one supporting passage shares the question's words and names the other,
  which shares none of them; a distractor shares one question word, so BM25's second passage is
  the distractor while a one-seed graph walk reaches the named passage (1/2 for BM25, 1 for the walk).

A router that reads the question's form (``form.wh_*``, hashed words) or the lists' overlap with
BM25 learns which member to serve; one that does not falls back to the better on average.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

_CONSONANTS, _VOWELS = "bdfgklmnprstvz", "aeiou"


def _words(rng: np.random.Generator, n: int) -> list[str]:
    """``n`` distinct made-up words of three consonant-vowel syllables."""
    out: dict[str, None] = {}
    while len(out) < n:
        out["".join(rng.choice(list(_CONSONANTS)) + rng.choice(list(_VOWELS)) for _ in range(3))] = None
    return list(out)


def switching_rows(n_per_kind: int = 30, seed: int = 0) -> list[dict]:
    """``2 * n_per_kind`` question rows (the JSONL format of the data folder), kinds alternating."""
    rng = np.random.default_rng(seed)
    words = iter(_words(rng, 16 * n_per_kind))
    rows = []
    for i in range(n_per_kind):
        w = [next(words) for _ in range(8)]
        a, b, shop, place = w[0].title(), w[1].title(), f"{w[2].title()} {w[3].title()}", w[4]
        rows.append({
            "id": f"direct-{i}", "dataset": "switching", "type": "direct", "answers": [b],
            "question": f"What {w[5]} made of {w[6]} holds {w[7]}?",
            "contexts": [
                {"title": a, "text": f"{a} is a {w[5]} made of {w[6]}. It is sold by {shop}.", "is_supporting": True},
                {"title": b, "text": f"{b} holds {w[7]} and {w[6]} from {shop}.", "is_supporting": True},
                {"title": shop, "text": f"{shop} is a shop in {place}.", "is_supporting": False},
            ],
        })
        w = [next(words) for _ in range(8)]
        company, person, other = f"{w[0].title()} {w[1].title()}", f"{w[2].title()} {w[3].title()}", w[4].title()
        rows.append({
            "id": f"bridge-{i}", "dataset": "switching", "type": "bridge", "answers": [person],
            "question": f"Who founded the firm that built the {w[5]} {w[6]}?",
            "contexts": [
                {"title": company, "text": f"{company} built the {w[5]} {w[6]}. It was founded by {person}.",
                 "is_supporting": True},
                {"title": person, "text": f"{person} was a {w[7]} teacher.", "is_supporting": True},
                {"title": other, "text": f"{other} kept a {w[5]} at home.", "is_supporting": False},
            ],
        })
    return rows


def write_switching_questions(folder: Path, n_per_kind: int = 30, seed: int = 0) -> Path:
    """Write :func:`switching_rows` to ``folder/switching.jsonl``; returns ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps(row) for row in switching_rows(n_per_kind, seed))
    (folder / "switching.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder
