"""A universal router: one router trained over every dataset's train questions, judged per dataset.

The paper trains one router over the questions of all its datasets together and reports it on
each dataset. :func:`fit_universal` stacks the train questions of every dataset (their rows over
one portfolio's members: the ``all`` portfolio's) and fits one router on them;
:func:`judge_universal` routes each dataset's test questions with it and reports its best-of-l
beside that dataset's own routers. The universal router picks among the ``all`` portfolio's
members, not the dataset's, so its best-of-l is over those members' utilities; its
``minus_single_best`` is paired, question by question, with the dataset's own single best member
(the one every per-dataset router is measured against), and its ``gap_closed_l1`` is measured
against the same single best member and the dataset portfolio's oracle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ragfolio.core.routing.base import Picks, RouteInputs, RouterProtocol
from ragfolio.core.routing.features.query_features import stack_rows
from ragfolio.core.routing.judging.evaluation import RoutingComparison, RoutingSplit, gap_closed, per_query_best_of_l
from ragfolio.core.stats import paired_differences


def stack_splits(splits: Mapping[str, RoutingSplit]) -> RoutingSplit:
    """The rows of every split, in the mapping's order, as one split (same blocks, same members)."""
    if not splits:
        raise ValueError("no dataset to stack")
    widths = {name: s.utilities.shape[1] for name, s in splits.items()}
    if len(set(widths.values())) != 1:
        raise ValueError(f"the datasets' splits have different member counts: {widths}")
    inputs = RouteInputs(stack_rows([s.inputs.query for s in splits.values()]))
    return RoutingSplit(inputs, np.concatenate([s.utilities for s in splits.values()]).astype(np.float32))


def fit_universal(
    make: Callable[[], RouterProtocol], train: Mapping[str, RoutingSplit], members: Sequence[str]
) -> RouterProtocol:
    """One router (``make()``, unfitted) fitted on the union of every dataset's train rows.

    Args:
        train: Dataset -> its train questions over one shared portfolio's ``members``.
    """
    union = stack_splits(train)
    return make().fit(union.inputs, union.utilities, list(members))


@dataclass(frozen=True)
class UniversalRouting:
    """The universal router's routing of each dataset's test questions.

    Attributes:
        members: The shared portfolio's members it routes to.
        picks: Dataset -> ``(n_test, k)`` member indices, best first.
        utilities: Dataset -> ``(n_test, k)`` the shared members' utilities on its test questions.
    """

    members: list[str]
    picks: dict[str, Picks]
    utilities: dict[str, np.ndarray]


def route_universal(router: RouterProtocol, test: Mapping[str, RoutingSplit]) -> UniversalRouting:
    """Route every dataset's test questions with ``router`` (all k members ranked)."""
    picks = {d: router.route(s.inputs, s.utilities.shape[1])[0] for d, s in test.items() if len(s.utilities)}
    return UniversalRouting(list(router.members_), picks, {d: test[d].utilities for d in picks})


def judge_universal(routing: UniversalRouting, dataset: str, own: RoutingComparison) -> dict[str, Any]:
    """The universal router's report entry on ``dataset``, beside its own routers' ``own`` comparison.

    Returns:
        ``{"members", "best_of_l", "gap_closed_l1", "minus_single_best": {"l1", "l2"}}``: best-of-l
        over the shared members; the gap and the paired 95% intervals against the dataset's own
        single best member (``own``'s ``top_average`` first pick) and oracle, question by question.
    """
    U, picks = routing.utilities[dataset], routing.picks[dataset]
    if len(U) != len(own.utilities):
        raise ValueError(f"{dataset}: {len(U)} universal test rows for {len(own.utilities)} in its own comparison")
    mine = per_query_best_of_l(U, picks)
    single = per_query_best_of_l(own.utilities, own.picks["top_average"])[:, 0]
    oracle = float(own.utilities.max(axis=1).mean()) if len(U) else 0.0
    ls = [l for l in (1, 2) if l <= mine.shape[1]]
    intervals = paired_differences(mine[:, [l - 1 for l in ls]], single) if len(U) else []
    return {
        "members": routing.members,
        "best_of_l": [float(v) for v in mine.mean(axis=0)] if len(U) else [],
        "gap_closed_l1": gap_closed(float(mine[:, 0].mean()), float(single.mean()), oracle) if len(U) else None,
        "minus_single_best": {f"l{l}": iv.to_dict() for l, iv in zip(ls, intervals, strict=True)},
    }
