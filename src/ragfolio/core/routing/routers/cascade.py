"""Cascade routing: shortlist m members from the query, run only those, pick among them from their lists.

The ``post_retrieval`` router wins on quality but runs every one of the k members; ``pre_retrieval``
runs only the l it routes to but sees no list. The cascade sits between them, with ``m`` members
run per question (``members_run``, 1 <= m <= k):

1. **Shortlist** from the query alone: a :class:`~ragfolio.core.routing.routers.retrieval_routers.PreRetrievalRouter`
   predicts every member's utility ``P[q, j]`` from the first-stage features; the shortlist is the
   default member (the best train mean, as both routers define it) and the m - 1 other members
   with the highest ``P[q, j]`` (ties: the lower index).
2. **Decide** among the shortlisted members from their result lists: a
   :class:`~ragfolio.core.routing.routers.retrieval_routers.PostRetrievalRouter` fitted on the same
   train questions predicts ``Q[q, j]`` for each shortlisted j. Its row model is per
   (question, member), ``x_qj = [m_qj, e_j, e_j (x) f_q, e_j (x) m_qj]``, so a member's prediction
   needs that member's list only, and the members that did not run are never read (their rows are
   zeroed, as an empty list's are). The first pick is the post-retrieval router's switch rule
   restricted to the shortlist: the top ``Q`` where it leads the default's by more than its
   ``margin_``, else the default (always shortlisted). The next picks are its completion
   (``greedy`` on train utilities, or ``top`` by prediction) with the members that ran first;
   members that did not run come last, so routing to l > m members runs l - m more.

The cross-member features of a list (``overlap_members``, ``unique``:
:data:`~ragfolio.core.routing.features.retrieval_features.CROSS_MEMBER_COLUMNS`) read the other
members' lists, which a cascade does not have, so its post-retrieval model leaves them out
(``cross_member_columns``; ``[]`` keeps them, which is sound only at m = k, where the cascade is
the post-retrieval router itself).

**Members run.** ``members_run`` None chooses m on train: the best-of-1 of every m = 1..k out of
fold (``n_folds`` of the post-retrieval stage, seeded; each fold refits both stages with the
ridge penalty and margin the full fit chose, so it measures m, not the stages' own selection) is
``val_curve_``, and m is the smallest whose value is within ``tolerance`` of the best (fewer
members run, for what they lose). A number sets m. The cascade **falls back** (``fallback_``, every
query to the default member first) when its post-retrieval stage does or when m = 1.

Saved as one ``router.json`` (the two stages' configs under ``pre`` and ``post``) and one
``router.safetensors`` (their arrays, prefixed ``pre.`` and ``post.``); no pickle.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, Self

import numpy as np
import numpy.typing as npt

from ragfolio.core.routing.base import (
    Picks,
    RouteInputs,
    Scores,
    check_training_data,
    member_names,
)
from ragfolio.core.routing.features.retrieval_features import CROSS_MEMBER_COLUMNS
from ragfolio.core.routing.routers.retrieval_routers import (
    PostRetrievalRouter,
    PreRetrievalRouter,
    _finite_or_none,
    paired_z,
    switch_first,
)
from ragfolio.core.routing.routers.saved import SavedRouter

logger = logging.getLogger(__name__)

Array = npt.NDArray[np.float64]
Stage = PreRetrievalRouter | PostRetrievalRouter


def shortlist(pre_scores: npt.NDArray[np.floating[Any]], default: int, m: int) -> npt.NDArray[np.int64]:
    """``(n, m)``: ``default``, then the m - 1 other members of highest ``pre_scores`` ``(n, k)`` (ties: lower index)."""
    n, k = np.shape(pre_scores)
    if not 1 <= m <= k:
        raise ValueError(f"members_run={m} must be in 1..{k}")
    order = np.argsort(-np.asarray(pre_scores), axis=1, kind="stable")
    others = order[order != default].reshape(n, k - 1)
    return np.concatenate([np.full((n, 1), default), others[:, : m - 1]], axis=1).astype(np.int64)


def ran_mask(short: npt.NDArray[np.int64], k: int) -> npt.NDArray[np.bool_]:
    """``(n, k)``: True where the member is in the query's shortlist ``short`` ``(n, m)``."""
    ran = np.zeros((len(short), k), dtype=bool)
    ran[np.arange(len(short))[:, None], short] = True
    return ran


def first_among(post_scores: Array, ran: npt.NDArray[np.bool_], default: int, margin: float) -> npt.NDArray[np.int64]:
    """The switch rule (:func:`~ragfolio.core.routing.routers.retrieval_routers.switch_first`) among the members that ran."""
    return switch_first(np.where(ran, post_scores, -np.inf), default, margin)


def ran_first(order: npt.NDArray[np.int64], ran: npt.NDArray[np.bool_]) -> npt.NDArray[np.int64]:
    """Each row of ``order`` ``(n, k)`` with the members that ran first, each part in its order."""
    not_ran = np.take_along_axis(~ran, order, axis=1).astype(np.int8)
    return np.take_along_axis(order, np.argsort(not_ran, axis=1, kind="stable"), axis=1)


@dataclass
class CascadeRouter(SavedRouter):
    """Shortlists ``members_run`` members from the query, runs those, routes among them (module docstring).

    Attributes:
        members_run: m, members run per question; None: chosen on train out of fold.
        tolerance: Choosing m: the smallest whose out-of-fold best-of-1 is within this of the best.
        cross_member_columns: Columns of the ``members`` block the post-retrieval stage leaves out
            (those that read the other members' lists).
        pre: :class:`~ragfolio.core.routing.routers.retrieval_routers.PreRetrievalRouter`
            hyperparameters of the shortlist stage.
        post: :class:`~ragfolio.core.routing.routers.retrieval_routers.PostRetrievalRouter`
            hyperparameters of the decision stage.
        random_state: Seed of both stages (unless they set one) and of the folds choosing m.

    Learned attributes: ``members_``, ``pre_``, ``post_`` (the fitted stages), ``default_``,
    ``members_run_``, ``val_curve_`` ``(k,)`` (out-of-fold best-of-1 at m = 1..k), ``val_default_``,
    ``val_gain_z_``, ``fallback_``.
    """

    name: ClassVar[str] = "cascade"
    reads: ClassVar[Literal["shortlist"]] = "shortlist"  # servable (ragfolio.core.routing.registry.READS)
    members_run: int | None = None
    tolerance: float = 0.0
    cross_member_columns: list[int] = field(default_factory=lambda: list(CROSS_MEMBER_COLUMNS))
    pre: dict[str, Any] = field(default_factory=dict)
    post: dict[str, Any] = field(default_factory=dict)
    random_state: int = 0
    members_: list[str] = field(default_factory=list, init=False, repr=False)

    def _stage(self, cls: type[Stage], given: Mapping[str, Any], where: str) -> Stage:
        try:
            return cls(**{"random_state": self.random_state, **given})
        except TypeError as error:
            raise ValueError(f"cascade {where}: {error}") from None

    @property
    def query_blocks(self) -> list[str]:
        """The query blocks either stage reads (what an online routing must compute)."""
        return list(dict.fromkeys([*self.pre.get("query_blocks", ["first_stage"]),
                                   *self.post.get("query_blocks", ["first_stage"])]))

    def _own(self, inputs: RouteInputs, k: int, ran: npt.NDArray[np.bool_] | None = None) -> RouteInputs:
        """``inputs`` with the post stage's results block less the cross-member columns, and the rows
        of the members that did not run (``ran`` False) zeroed."""
        block_name = self.post.get("results_block", "members")
        block = (inputs.results or {}).get(block_name)
        if block is None or np.ndim(block) != 3 or np.shape(block)[1] != k:
            raise ValueError(f"cascade reads results[{block_name!r}] of shape (n, {k}, d): the features of each "
                             f"member's result list; got {None if block is None else np.shape(block)}")
        if bad := [c for c in self.cross_member_columns if not 0 <= c < np.shape(block)[2]]:
            raise ValueError(f"cross_member_columns {bad} are outside the {np.shape(block)[2]} member features")
        keep = [c for c in range(np.shape(block)[2]) if c not in self.cross_member_columns]
        own = np.asarray(block, dtype=np.float64)[:, :, keep]
        if ran is not None:
            own = np.where(ran[:, :, None], own, 0.0)
        return RouteInputs(inputs.query, {**(inputs.results or {}), block_name: own})

    # --- fit ----------------------------------------------------------------------------------
    def fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None = None) -> Self:
        """Fit both stages on the train questions, then measure (and, unset, choose) m out of fold."""
        U = np.asarray(check_training_data(inputs, U), dtype=np.float64)
        n, k = U.shape
        if self.members_run is not None and not 1 <= self.members_run <= k:
            raise ValueError(f"members_run={self.members_run} must be in 1..{k} (or null: chosen on train)")
        self.members_ = member_names(members, k)
        own = self._own(inputs, k)
        self.pre_ = self._stage(PreRetrievalRouter, self.pre, "pre").fit(inputs, U, self.members_)
        self.post_ = self._stage(PostRetrievalRouter, self.post, "post").fit(own, U, self.members_)
        self.default_ = self.post_.default_
        self.val_default_ = float(U[:, self.default_].mean())
        per_query = self._out_of_fold(inputs, own, U)  # (n, k): best-of-1 per question at m = 1..k
        self.val_curve_ = per_query.mean(axis=0) if n else np.full(k, self.val_default_)
        if self.members_run is None:
            within = self.val_curve_ >= self.val_curve_.max() - self.tolerance - 1e-12
            self.members_run_ = int(np.argmax(within)) + 1
        else:
            self.members_run_ = int(self.members_run)
        m = self.members_run_
        self.val_gain_z_ = paired_z(per_query[:, m - 1] - U[:, self.default_]) if n > 1 else 0.0
        self.fallback_ = bool(self.post_.fallback_ or m == 1)
        logger.info("cascade: out-of-fold best-of-1 by members run %s (default %.3f): runs %d of %d%s",
                    " ".join(f"{v:.3f}" for v in self.val_curve_), self.val_default_, m, k,
                    ", falls back to the default member" if self.fallback_ else "")
        return self

    def _out_of_fold(self, inputs: RouteInputs, own: RouteInputs, U: npt.NDArray[np.floating[Any]]) -> Array:
        """``(n, k)``: each train question's utility of its first pick at m = 1..k, by stages fitted on the
        other folds with the full fit's penalty and margin (the default member's when the post stage fell back)."""
        n, k = U.shape
        out = np.tile(U[:, [self.default_]], (1, k))
        folds_n = int(self.post_.n_folds)
        if self.post_.fallback_ or n < max(folds_n, 2):
            return out
        folds = np.random.default_rng(self.random_state).permutation(n) % folds_n
        for fold in range(folds_n):
            held, rest = np.flatnonzero(folds == fold), np.flatnonzero(folds != fold)
            pre = _refit(self.pre_, inputs.take(rest), U[rest], self.members_)
            post = _refit(self.post_, own.take(rest), U[rest], self.members_)
            pre_scores, post_scores = pre.predict(inputs.take(held)), post.predict(own.take(held))
            margin = float("inf") if post.fallback_ else post.margin_
            for m in range(1, k + 1):
                ran = ran_mask(shortlist(pre_scores, post.default_, m), k)
                first = first_among(post_scores, ran, post.default_, margin)
                out[held, m - 1] = U[held, first]
        return out

    # --- route --------------------------------------------------------------------------------
    def shortlist(self, inputs: RouteInputs) -> npt.NDArray[np.int64]:
        """``(n, members_run_)``: the members to run for each query, the default first (query blocks only)."""
        self._check_fitted()
        return shortlist(self.pre_.predict(inputs), self.default_, self.members_run_)

    def members_run_curve(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]]) -> dict[str, Any]:
        """What running fewer or more members would give on n questions with ``(n, k)`` utilities ``U``
        (test questions, for reports): the best-of-1 of these fitted stages at every m = 1..k.

        Returns:
            ``{"members_run": [1..k], "best_of_1": [...], "chosen": members_run_, "val_best_of_1":
            val_curve_}`` (the last: out of fold on train, as m was chosen).
        """
        self._check_fitted()
        U = np.asarray(check_training_data(inputs, U), dtype=np.float64)
        k = len(self.members_)
        values = []
        for m in range(1, k + 1):
            at_m = copy.copy(self)
            at_m.members_run_ = m
            first = at_m.route(inputs, 1)[0][:, 0]
            values.append(float(U[np.arange(len(U)), first].mean()) if len(U) else None)
        return {"members_run": list(range(1, k + 1)), "best_of_1": values, "chosen": self.members_run_,
                "val_best_of_1": [_finite_or_none(float(v)) for v in self.val_curve_]}

    def members_ran(self, l: int) -> int:  # noqa: E741 - the routers' name for members per query
        """Members run per question to route it to ``l``: the shortlist, and the picks beyond it (``max(m, l)``)."""
        return max(self.members_run_, self.checked_l(l))

    def _route(self, inputs: RouteInputs, l: int) -> tuple[Picks, Scores]:
        """``(picks, scores)``: the cascade's ``(n, l)`` picks (module docstring) and ``(n, k)`` predicted
        utilities, by the post-retrieval stage where the member ran and by the shortlist stage elsewhere.

        Only the shortlisted members' rows of the results block are read.
        """
        k = len(self.members_)
        pre_scores = self.pre_.predict(inputs)
        ran = ran_mask(shortlist(pre_scores, self.default_, self.members_run_), k)
        post_scores = self.post_.predict(self._own(inputs, k, ran))
        scores = np.where(ran, post_scores, pre_scores)
        rows = np.arange(len(scores))
        if self.post_.fallback_:
            first = np.full(len(scores), self.default_, dtype=np.int64)
        else:
            first = first_among(post_scores, ran, self.default_, self.post_.margin_)
        if self.post_.completion == "greedy":
            order = self.post_.completion_[first]
        else:
            ranked = np.argsort(-scores, axis=1, kind="stable")
            order = np.concatenate([first[:, None], ranked[ranked != first[:, None]].reshape(len(scores), k - 1)], axis=1)
        picks = ran_first(np.asarray(order, dtype=np.int64).reshape(len(rows), k), ran)
        return picks[:, :l], scores

    def _check_fitted(self) -> None:
        if not hasattr(self, "fallback_"):
            raise RuntimeError(f"this {type(self).__name__} is not fitted: call fit() or load() first")

    # --- persistence --------------------------------------------------------------------------
    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``router.json``: hyperparameters, members, m and its curve, each stage's config; arrays: each stage's, prefixed."""
        pre_config, pre_arrays = self.pre_._state()
        post_config, post_arrays = self.post_._state()
        config = {
            "hyperparameters": {k: v for k, v in asdict(self).items() if not k.endswith("_")},
            "members": self.members_, "default": self.default_, "members_run": self.members_run_,
            "val_curve": [_finite_or_none(float(v)) for v in self.val_curve_],
            "val_default": _finite_or_none(self.val_default_), "val_gain_z": _finite_or_none(self.val_gain_z_),
            "fallback": self.fallback_, "pre": pre_config, "post": post_config,
        }
        arrays = {**{f"pre.{k}": v for k, v in pre_arrays.items()}, **{f"post.{k}": v for k, v in post_arrays.items()}}
        return config, arrays

    @classmethod
    def _from_state(cls, config: Mapping[str, Any], arrays: Mapping[str, Any]) -> Self:
        router = cls(**config["hyperparameters"])
        router.members_, router.default_ = list(config["members"]), int(config["default"])
        router.members_run_, router.fallback_ = int(config["members_run"]), bool(config["fallback"])
        router.val_curve_ = np.array([np.nan if v is None else v for v in config["val_curve"]], dtype=np.float64)
        router.val_default_ = float("nan") if config["val_default"] is None else float(config["val_default"])
        router.val_gain_z_ = float("inf") if config["val_gain_z"] is None else float(config["val_gain_z"])
        for stage, stage_cls in (("pre", PreRetrievalRouter), ("post", PostRetrievalRouter)):
            prefix = f"{stage}."
            mine = {k[len(prefix):]: v for k, v in arrays.items() if k.startswith(prefix)}
            setattr(router, f"{stage}_", stage_cls._from_state(config[stage], mine))
        return router

    def selection(self) -> dict[str, Any]:
        """What the train questions chose (for reports): the fallback, m and its out-of-fold curve, the
        values the router choice compares (at the chosen m) and each stage's own selection."""
        self._check_fitted()
        m = self.members_run_
        return {"fallback": self.fallback_, "val_best_of_1": _finite_or_none(float(self.val_curve_[m - 1])),
                "val_default": _finite_or_none(self.val_default_), "val_gain_z": _finite_or_none(self.val_gain_z_),
                "default": self.members_[self.default_], "members_run": m,
                "val_curve": [_finite_or_none(float(v)) for v in self.val_curve_],
                "pre": self.pre_.selection(), "post": self.post_.selection()}


def _refit(stage: Stage, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: list[str]) -> Stage:
    """A stage of the same kind fitted on ``inputs``, trying only the penalty and margin ``stage`` chose
    (its whole grid of margins when it fell back)."""
    given = stage._hyperparameters()
    margins = list(stage.margins) if stage.fallback_ else [stage.margin_]
    return type(stage)(**{**given, "alphas": [stage.alpha_], "margins": margins}).fit(inputs, U, members)
