"""Which retrieval features a retrieval router's gain rests on: refit without each feature group.

The routers that see the retrieval (:mod:`ragfolio.core.routing.routers.retrieval_routers`) read two blocks, named
column by column by :class:`~ragfolio.core.routing.features.retrieval_features.RetrievalFeaturizer`:
``first_stage`` ``(n, d_f)`` (in ``RouteInputs.query``) and ``members`` ``(n, k, d_m)`` (in
``RouteInputs.results``). :func:`feature_groups` sorts those columns into the groups below, and
:func:`ablate_features` refits the router once with every feature, once without each group and
once without each whole block (same hyperparameters, the same model selection on train
questions, so a group whose loss makes the router fall back shows it), and routes the judged
questions with each (dev, where the run has them: the ablation is a choice of features, and
choices are not read on test).

**Multiplicity.** The table reports about two intervals per variant (minus the single best member,
minus every feature); with a dozen variants a few 95% intervals would clear zero by chance alone.
Each interval is therefore at the Bonferroni level ``1 - (1 - confidence) / m`` over the ``m``
intervals reported, so the table as a whole errs with probability at most ``1 - confidence``.

Groups (by column name):

* ``first_stage.scores``: each base's ``top1``, ``margin2``, ``margin5``;
* ``first_stage.lists``: each base's ``entity_coverage``, ``titles_in_question``, ``seed_degree``, ``seed_links``;
* ``first_stage.agreement``: ``agree.*`` (overlap and rank correlation of every pair of bases);
* ``first_stage.form``: ``form.*`` (the question's form);
* ``members.scores``: each member's ``top1`` and ``mean``;
* ``members.agreement``: ``overlap_members``, ``unique``, ``overlap.<base>``;
* ``members.lists``: ``entity_coverage``, ``titles_in_question``, ``seed_degree``, ``seed_links``, ``distinct_titles``;
* ``members.judgements``: ``judge.*`` (the cross-encoder's judgement of the list), when the features hold them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.judging.evaluation import RoutingComparison, RoutingSplit, gap_closed, route_all
from ragfolio.core.routing.registry import make_router
from ragfolio_lab.judging.headroom import headroom

BLOCKS = ("first_stage", "members")
ALL_FEATURES = "all features"
_SCORES = {"first_stage": ("top1", "margin2", "margin5"), "members": ("top1", "mean")}


def feature_group(block: str, name: str) -> str:
    """The group (see the module docstring) of column ``name`` of ``block``."""
    if block not in BLOCKS:
        raise ValueError(f"block {block!r} is not one of {BLOCKS}")
    last = name.rsplit(".", 1)[-1]
    if block == "first_stage":
        if name.startswith("form."):
            return "first_stage.form"
        if name.startswith("agree."):
            return "first_stage.agreement"
        return "first_stage.scores" if last in _SCORES[block] else "first_stage.lists"
    if name in _SCORES[block]:
        return "members.scores"
    if name in ("overlap_members", "unique") or name.startswith("overlap."):
        return "members.agreement"
    if name.startswith("judge."):
        return "members.judgements"
    return "members.lists"


def feature_groups(names: Mapping[str, Sequence[str]]) -> dict[str, dict[str, list[int]]]:
    """Group -> block -> column indices, for the column ``names`` of each block, in first-seen order."""
    groups: dict[str, dict[str, list[int]]] = {}
    for block in BLOCKS:
        for i, name in enumerate(names.get(block, ())):
            groups.setdefault(feature_group(block, name), {}).setdefault(block, []).append(i)
    return groups


def drop_columns(inputs: RouteInputs, drop: Mapping[str, Sequence[int]]) -> RouteInputs:
    """``inputs`` without the columns ``drop[block]`` of the ``first_stage`` and ``members`` blocks."""
    query, results = dict(inputs.query), dict(inputs.results or {})
    for block, columns in drop.items():
        owner = query if block == "first_stage" else results
        if block not in BLOCKS or block not in owner:
            raise ValueError(f"no {block!r} block to drop columns from")
        owner[block] = np.delete(np.asarray(owner[block]), list(columns), axis=-1)
    return RouteInputs(query, results or None)


def _drops(names: Mapping[str, Sequence[str]]) -> dict[str, dict[str, list[int]]]:
    """Label -> columns to drop: every feature kept, each group dropped, each whole block dropped."""
    drops: dict[str, dict[str, list[int]]] = {ALL_FEATURES: {}}
    drops.update({f"without {group}": cols for group, cols in feature_groups(names).items()})
    drops.update({f"without {block}": {block: list(range(len(names[block])))} for block in BLOCKS if names.get(block)})
    return drops


def ablate_features(
    mode: str, hyperparameters: Mapping[str, Any], train: RoutingSplit, test: RoutingSplit,
    members: Sequence[str], names: Mapping[str, Sequence[str]], *, seed: int = 0, confidence: float = 0.95,
) -> dict[str, Any]:
    """Refit router ``mode`` (``pre_retrieval`` or ``post_retrieval``) on ``train`` with every feature
    and without each group and block, and judge each at l = 1 on ``test`` (the judged questions:
    pass the dev split where there is one).

    Returns:
        ``{"n_train", "n_test", "single_best_member", "oracle", "headroom_share", "n_intervals",
        "interval_confidence", "variants": {label: {"n_features", "fallback", "best_of_1",
        "gap_closed_l1", "minus_single_best", "minus_all_features", "captured", "worse"}}}``;
        intervals are paired bootstrap intervals at l = 1
        (:meth:`~ragfolio.core.routing.judging.evaluation.RoutingComparison.differences`), each at
        ``interval_confidence``: ``confidence`` Bonferroni-corrected over the ``n_intervals`` reported.
    """
    baselines = {name: make_router(name).fit(train.inputs, train.utilities, members)
                 for name in ("top_average", "oracle")}
    total = sum(len(names.get(b, ())) for b in BLOCKS)
    routers, picks, n_features = {}, {}, {}
    for label, drop in _drops(names).items():
        fit_on, test_on = (RoutingSplit(drop_columns(s.inputs, drop), s.utilities) for s in (train, test))
        routers[label] = make_router(mode, **{"random_state": seed, **hyperparameters}).fit(
            fit_on.inputs, fit_on.utilities, members)
        picks[label] = route_all({label: routers[label]}, test_on)[label]
        n_features[label] = total - sum(len(c) for c in drop.values())
    picks.update(route_all(baselines, test))
    comparison = RoutingComparison(picks, test.utilities)
    curves = comparison.curves
    single, oracle = curves["top_average"][0], curves["oracle"][0]
    n_intervals = 2 * len(routers) - 1  # minus the single best for every variant, minus all features for the rest
    level = 1 - (1 - confidence) / n_intervals
    to_single = comparison.differences("top_average", (1,), fixed=True, confidence=level)
    to_all = comparison.differences(ALL_FEATURES, (1,), confidence=level)
    default = int(picks["top_average"][0, 0]) if len(test.utilities) else 0  # the best train mean, as routers take it
    room = headroom(test.utilities, default, {label: picks[label] for label in routers})
    variants = {
        label: {
            "n_features": n_features[label],
            "fallback": bool(getattr(router, "fallback_", False)),
            "best_of_1": curves[label][0],
            "gap_closed_l1": gap_closed(curves[label][0], single, oracle),
            "minus_single_best": to_single[label]["l1"],
            **({"minus_all_features": to_all[label]["l1"]} if label != ALL_FEATURES else {}),
            "captured": room["routers"][label]["captured"],
            "worse": room["routers"][label]["worse"],
        }
        for label, router in routers.items()
    }
    return {"n_train": len(train.utilities), "n_test": len(test.utilities), "single_best_member": single,
            "oracle": oracle, "headroom_share": room["share"], "n_intervals": n_intervals,
            "interval_confidence": level, "variants": variants}
