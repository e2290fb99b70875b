"""Whether a run's questions can tell the candidates apart, and the rule that breaks their ties.

Greedy picks the candidate of largest marginal gain. Where several share it, the choice says
nothing about the retrievers, and on a few easy questions it happens at every pick (20
hand-written questions on which every candidate scores 1.000 make the "portfolio" the first five
candidates of the grid). Two things are checked, per selection key (:func:`separation`):

* **ties**: the picks (1-based, within the portfolio's ``k``) whose gain another candidate shares;
* **too few questions**: the sample-size bound's accuracy at the number of questions selected on
  (:func:`~ragfolio.core.selection.sample_complexity.epsilon_at`, delta 0.05) above
  ``max_epsilon``: the sample may misjudge some portfolio's value by more than that.

Ties are broken by a documented rule rather than the grid's order (:func:`tie_order`): spread the
portfolio over families (a family is a candidate name's leading word: ``bm25``, ``dense``,
``hybrid``, ``graph``, ...), taking each family's best candidate (train mean) in turn, families in
the order of their best candidate's train mean (then name), candidates within a family by train
mean (then name). Greedy runs on the columns in that order, so among equal gains the earlier
column wins (:func:`~ragfolio.core.selection.greedy.select_greedy` breaks ties by column index).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.selection.greedy import GreedyResult
from ragfolio.core.selection.sample_complexity import epsilon_at

MAX_EPSILON = 0.1  # the default: above it, the questions are too few for the bound to say the choice holds


def family(name: str) -> str:
    """A candidate's family: the leading word of its name (``"bm25(k1=1.2)"`` -> ``"bm25"``)."""
    match = re.match(r"[A-Za-z0-9_]+", name)
    return match.group(0) if match else name


def tie_order(U: npt.ArrayLike, names: Sequence[str]) -> list[int]:
    """The column order greedy breaks ties in: round-robin over families, best train means first.

    Returns:
        Column indices of ``U``, a permutation.
    """
    means = np.asarray(U, dtype=np.float64).mean(axis=0) if len(np.asarray(U)) else np.zeros(len(names))
    by_family: dict[str, list[int]] = defaultdict(list)
    for col in sorted(range(len(names)), key=lambda c: (-means[c], names[c])):
        by_family[family(names[col])].append(col)
    families = sorted(by_family, key=lambda f: (-means[by_family[f][0]], f))
    order: list[int] = []
    depth = 0
    while len(order) < len(names):
        order += [by_family[f][depth] for f in families if depth < len(by_family[f])]
        depth += 1
    return order


def tied_picks(result: GreedyResult, k: int) -> list[int]:
    """The picks (1-based, the first ``k``) whose marginal gain another live candidate shared.

    Reads the exact top gains :func:`~ragfolio.core.selection.greedy.select_greedy` keeps per pick;
    a result without them (another optimizer) reports none.
    """
    bounds = result.gain_bounds
    if bounds is None or bounds.shape[1] < 2:
        return []
    return [i + 1 for i in range(min(k, len(result.indices))) if bounds[i, 0] == bounds[i, 1]]


@dataclass(frozen=True)
class Separation:
    """Whether one key's questions separate the candidates (:func:`separation`).

    Attributes:
        tied_picks: Picks (1-based, within ``k``) decided by the tie rule.
        epsilon: The sample-size bound's accuracy at the questions selected on (delta 0.05).
        max_epsilon: The largest accuracy accepted.
        n: Questions selected on.
    """

    tied_picks: list[int] = field(default_factory=list)
    epsilon: float = 0.0
    max_epsilon: float = MAX_EPSILON
    n: int = 0

    @property
    def separates(self) -> bool:
        return not self.tied_picks and self.epsilon <= self.max_epsilon

    def reasons(self) -> list[str]:
        """Why the questions do not separate the candidates, in words; empty when they do."""
        out = []
        if self.tied_picks:
            out.append(f"picks {self.tied_picks} were ties, broken by the family rule (docs/own_data.md)")
        if self.epsilon > self.max_epsilon:
            out.append(f"{self.n} questions bound every portfolio's value only to +/-{self.epsilon:.2f} "
                       f"(above {self.max_epsilon}): more questions make the choice firmer")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"separates": self.separates, "tied_picks": list(self.tied_picks), "epsilon": round(self.epsilon, 4),
                "max_epsilon": self.max_epsilon, "n": self.n, "reasons": self.reasons()}


def separation(result: GreedyResult, n: int, m: int, k: int, max_epsilon: float = MAX_EPSILON) -> Separation:
    """How well ``n`` questions separate ``m`` candidates for a portfolio of ``k`` (see the module doc)."""
    return Separation(tied_picks(result, k), epsilon_at(max(n, 1), m, k), max_epsilon, n)
