"""The learned router: which of the k portfolio members should serve a query.

Architecture (DESIGN.md section 1): every feature block of a query (hashed n-grams, one dense
embedding per encoder; see :mod:`ragfolio.core.routing.features.query_features`) is projected to ``hidden`` units, the
projections are concatenated and fused by a small MLP into a query vector ``z``; each member j
has a learned embedding ``e_j``; the member's score is ``cos(z, e_j)``.

Training (``fit``) minimises, over a mini-batch,

* a softmax cross-entropy of ``tau * cos`` against a target that is uniform over the tied-best
  members of each question (a question whose best utility is 0, or whose best is shared by more
  than ``max_ties`` members, says nothing about which member to prefer and is left out of this
  term), plus
* ``utility_weight`` times a binary cross-entropy of ``sigmoid(tau * cos)`` against the utilities
  themselves (utility regression: every question teaches how good each member is, ties included,
  so the router keeps the strong default unless a query gives a reason to move away from it).

``tau`` is a learned temperature. Early stopping keeps the weights with the best validation
best-of-1 utility (mean over validation questions of ``U[q, argmax score]``) on a held-out part of
the training questions.

The first routed member is the top-scored one only where it leads the default member (the best
on average over training questions) by more than a margin tuned on the validation questions: on
most questions the default is best or tied, and a router should leave it only when a query gives
it reason to.

Routing to ``l > 1`` members is set-aware: the first member is the top-scored one; each next member
is the greedy pick that most raises the best-of-l utility over the *training* questions, each
weighted by its similarity to the query (``softmax(cos(x_q, x_i) / neighbour_temperature)`` over
the dense query embeddings). Taking the l top-scored members instead tends to pick members that
are good on the same questions; greedy completion picks complementary ones, as portfolio
selection does globally (``neighbour_temperature=None`` gives plain top-l by score).

Weights and the training memory are saved as safetensors, the configuration as JSON; the router is
registered as ``learned`` (:mod:`ragfolio.core.routing.registry`) and reads only ``RouteInputs.query``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, Self

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
import torch
from torch import nn
from tqdm.auto import tqdm

from ragfolio.core.routing.base import (
    LEARNED,
    Picks,
    RouteInputs,
    check_training_data,
    member_names,
)
from ragfolio.core.routing.determinism import deterministic_fit
from ragfolio.core.routing.features.query_features import Features, take_rows
from ragfolio.core.routing.routers.saved import SavedRouter

logger = logging.getLogger(__name__)

SWITCH_MARGINS = (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 2.5)


def tied_best(U: npt.NDArray[np.floating[Any]], tolerance: float = 1e-6) -> npt.NDArray[np.bool_]:
    """``(n, k)`` mask of each question's best members (within ``tolerance`` of the row max)."""
    U = np.asarray(U, dtype=np.float32)
    return U >= U.max(axis=1, keepdims=True) - tolerance


def routing_targets(
    U: npt.NDArray[np.floating[Any]], max_ties: int, tolerance: float = 1e-6
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]:
    """Soft targets uniform over the tied-best members, and which questions keep one.

    Returns:
        ``(targets, keep)``: ``targets`` is ``(n, k)``, each kept row sums to 1; ``keep`` is
        ``(n,)``, False for questions with no winner (best utility 0) or more than ``max_ties``
        tied-best members.
    """
    best = tied_best(U, tolerance)
    ties = best.sum(axis=1)
    keep = (np.asarray(U).max(axis=1) > 0) & (ties <= max_ties)
    return (best / ties[:, None]).astype(np.float32), keep


class _RouterNet(nn.Module):
    def __init__(self, inputs: dict[str, int], k: int, hidden: int, embedding_dim: int, dropout: float) -> None:
        super().__init__()
        self.names = sorted(inputs)
        self.project = nn.ModuleDict({name: nn.Linear(inputs[name], hidden) for name in self.names})
        self.fuse = nn.Sequential(
            nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden * len(self.names), hidden), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(hidden, embedding_dim),
        )
        self.members = nn.Parameter(torch.randn(k, embedding_dim) / math.sqrt(embedding_dim))
        self.log_tau = nn.Parameter(torch.tensor(math.log(10.0)))

    def forward(self, blocks: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(batch, k)`` cosine similarities between the fused query and each member."""
        z = self.fuse(torch.cat([self.project[name](blocks[name]) for name in self.names], dim=1))
        return nn.functional.normalize(z, dim=1) @ nn.functional.normalize(self.members, dim=1).T


def _tensors(features: Features, rows: npt.NDArray[np.int64] | None = None) -> dict[str, torch.Tensor]:
    """Dense float32 tensors of ``rows`` of every block (all rows when ``rows`` is None)."""
    out = {}
    for name, block in features.items():
        part = block if rows is None else block[rows]
        out[name] = torch.from_numpy(np.asarray(part.toarray() if sp.issparse(part) else part, dtype=np.float32))
    return out


def _neighbour_keys(features: Features) -> npt.NDArray[np.float32]:
    """``(n, d)`` L2-normalised concatenation of the dense blocks (the text block if there is none)."""
    dense = [np.asarray(features[name], dtype=np.float32) for name in sorted(features) if not sp.issparse(features[name])]
    if not dense:
        dense = [np.asarray(features[name].toarray(), dtype=np.float32) for name in sorted(features)]
    keys = np.concatenate(dense, axis=1)
    return keys / np.maximum(np.linalg.norm(keys, axis=1, keepdims=True), 1e-12)


def _dense_if_small(features: Features, max_cells: int = 50_000_000) -> Features:
    """Densify sparse blocks once when they fit (fast mini-batches); keep them sparse otherwise."""
    return {
        name: block.toarray() if sp.issparse(block) and block.shape[0] * block.shape[1] <= max_cells else block
        for name, block in features.items()
    }


@dataclass
class Router(SavedRouter):
    """A tie-aware, utility-regressing router over ``k`` portfolio members (hyperparameters only).

    Attributes:
        hidden: Width of each block's projection and of the fusion MLP.
        embedding_dim: Dimension of the query and member embeddings.
        dropout: Dropout in the fusion MLP.
        utility_weight: Weight of the utility-regression term beside the tie-aware softmax.
        max_ties: Questions with more tied-best members are left out of the softmax term
            (``None``: k - 1, i.e. only questions where every member ties are left out).
        lr, weight_decay, batch_size, max_epochs, patience: AdamW training and early stopping.
        val_fraction: Share of training questions held out for early stopping.
        neighbour_temperature: Softmax temperature of the training-question weights used to
            complete a routing beyond its first member (``None``: plain top-l by score).
        switch_margin: The first routed member is the top-scored one only where its score leads
            the *default* member's (the best on average over training questions) by more than
            this; otherwise the default. ``None`` tunes it on the validation questions over
            :data:`SWITCH_MARGINS` (cosines differ by at most 2, so 2.5 means "never switch").
        random_state: Seed of the validation split, initialisation and batch order.

    Learned attributes (after ``fit``): ``members_`` (names), ``inputs_`` (block name -> dim),
    ``net_``, ``best_epoch_``, ``val_best_of_1_`` (best epoch, top-scored member), ``default_`` and
    ``switch_margin_``, ``val_routed_best_of_1_`` (held-out best-of-1 as routed, with the tuned margin)
    and ``val_default_`` (the default member's there), and the training memory ``memory_keys_``
    ``(n_train, d)`` (normalised dense embeddings) and ``memory_utilities_`` ``(n_train, k)``.
    """

    name: ClassVar[str] = LEARNED
    reads: ClassVar[Literal["query"]] = "query"  # servable, from query features alone
    judged_as: ClassVar[Mapping[str, int]] = {"summary": 1}  # first in the report's summary
    tensors: ClassVar[Literal["numpy", "torch", "none"]] = "torch"
    hidden: int = 128
    embedding_dim: int = 64
    dropout: float = 0.3
    utility_weight: float = 1.0
    max_ties: int | None = None
    lr: float = 1e-3
    weight_decay: float = 1e-2
    batch_size: int = 64
    max_epochs: int = 150
    patience: int = 25
    val_fraction: float = 0.2
    neighbour_temperature: float | None = 0.1
    switch_margin: float | None = None
    random_state: int = 0
    members_: list[str] = field(default_factory=list, init=False, repr=False)
    inputs_: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def _hyperparameters(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if not k.endswith("_")}

    def fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None = None) -> Self:
        """Train on the query features of ``inputs`` (n rows) and the portfolio's utilities ``U`` ``(n, k)``."""
        U = check_training_data(inputs, U)
        n, k = U.shape
        if n < 2:
            raise ValueError(f"need at least 2 questions to train a router, got U of shape {U.shape}")
        self.members_ = member_names(members, k)
        features = inputs.query
        self.inputs_ = {name: int(block.shape[1]) for name, block in features.items()}
        max_ties = self.max_ties if self.max_ties is not None else max(k - 1, 1)
        targets, keep = routing_targets(U, max_ties)
        memory_keys = _neighbour_keys(features)
        features = _dense_if_small(features)

        with deterministic_fit(self.random_state):  # the same bits in any process (threads, seed, kernels)
            rng = np.random.default_rng(self.random_state)
            order = rng.permutation(n)
            n_val = int(round(self.val_fraction * n)) if n >= 10 else 0
            val, train = order[:n_val], order[n_val:]
            self.net_ = _RouterNet(self.inputs_, k, self.hidden, self.embedding_dim, self.dropout)
            optimizer = torch.optim.AdamW(self.net_.parameters(), lr=self.lr, weight_decay=self.weight_decay)
            U_t, targets_t, keep_t = torch.from_numpy(U), torch.from_numpy(targets), torch.from_numpy(keep)

            best_score, best_state, stale = -np.inf, None, 0
            self.best_epoch_ = 0
            epochs = tqdm(range(self.max_epochs), desc="router", unit="epoch", leave=False)
            for epoch in epochs:
                self.net_.train()
                for start in range(0, len(train), self.batch_size):
                    rows = train[start : start + self.batch_size]
                    loss = self._loss(self.net_(_tensors(features, rows)), U_t[rows], targets_t[rows], keep_t[rows])
                    optimizer.zero_grad()
                    loss.backward()
                    optimizer.step()
                rng.shuffle(train)
                score = self._best_of_1(features, U, val if n_val else train)
                if score > best_score + 1e-9:
                    best_score, stale, self.best_epoch_ = score, 0, epoch
                    best_state = {name: t.detach().clone() for name, t in self.net_.state_dict().items()}
                else:
                    stale += 1
                    if stale >= self.patience:
                        break
            if best_state is not None:
                self.net_.load_state_dict(best_state)
            self.net_.eval()
            self.default_ = int(np.argmax(U[train].mean(axis=0)))
            rows = val if n_val else train
            self.switch_margin_ = self._tune_margin(features, U, rows)
            self.val_best_of_1_ = float(best_score)
            # What serving it would give on the held-out questions, beside the default member there
            # (what ``router_training.bundle.router: auto`` compares across routers).
            self.val_routed_best_of_1_ = float(U[rows, self._first(self.scores(take_rows(features, rows)),
                                                                  self.switch_margin_)].mean())
            self.val_default_ = float(U[rows, self.default_].mean())
        self.memory_keys_ = torch.from_numpy(memory_keys)
        self.memory_utilities_ = torch.from_numpy(U)
        logger.info(
            "router: %d questions (%d in the softmax term, %d held out), best epoch %d, validation best-of-1 %.3f, "
            "switches away from member %d when its score leads by > %.2f",
            n, int(keep[train].sum()), n_val, self.best_epoch_, best_score, self.default_, self.switch_margin_,
        )
        return self

    def _loss(self, cos: torch.Tensor, U: torch.Tensor, targets: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        logits = self.net_.log_tau.exp() * cos
        loss = self.utility_weight * nn.functional.binary_cross_entropy_with_logits(logits, U)
        if keep.any():
            log_p = nn.functional.log_softmax(logits[keep], dim=1)
            loss = loss - (targets[keep] * log_p).sum(dim=1).mean()
        return loss

    def _tune_margin(self, features: Features, U: npt.NDArray[np.float32], rows: npt.NDArray[np.int64]) -> float:
        """The switch margin with the best held-out best-of-1 (the largest such margin on ties)."""
        if self.switch_margin is not None:
            return float(self.switch_margin)
        scores = self.scores(take_rows(features, rows))
        values = [float(U[rows, self._first(scores, margin)].mean()) for margin in SWITCH_MARGINS]
        best = max(values)
        return max(m for m, v in zip(SWITCH_MARGINS, values, strict=True) if v >= best - 1e-12)

    def _first(self, scores: npt.NDArray[np.float32], margin: float) -> npt.NDArray[np.int64]:
        """The top-scored member where it leads the default member by more than ``margin``, else the default."""
        top = scores.argmax(axis=1)
        lead = scores[np.arange(len(scores)), top] - scores[:, self.default_]
        return np.where(lead > margin, top, self.default_).astype(np.int64)

    def _best_of_1(self, features: Features, U: npt.NDArray[np.float32], rows: npt.NDArray[np.int64]) -> float:
        picks = self.scores(take_rows(features, rows)).argmax(axis=1)
        return float(U[rows, picks].mean())

    def scores(self, features: Features) -> npt.NDArray[np.float32]:
        """``(n, k)`` cosine scores of every member for every query."""
        self._check_fitted()
        missing = set(self.inputs_) - set(features)
        if missing:
            raise ValueError(f"feature blocks {sorted(missing)} are missing; the router needs {sorted(self.inputs_)}")
        for name, dim in self.inputs_.items():
            if features[name].shape[1] != dim:
                raise ValueError(f"feature block {name!r} has {features[name].shape[1]} columns, the router expects {dim}")
        was_training = self.net_.training
        self.net_.eval()
        with torch.no_grad():
            out = self.net_(_tensors({k: features[k] for k in self.inputs_}))
        self.net_.train(was_training)
        return out.numpy()

    def _route(self, inputs: RouteInputs, l: int) -> tuple[Picks, npt.NDArray[np.float32]]:
        """``(picks, scores)``: ``(n, l)`` member indices, best first (the first member, then greedy
        completion), and the ``(n, k)`` cosine scores they came from."""
        features = inputs.query
        scores = self.scores(features)
        first = self._first(scores, self.switch_margin_)
        ranked = np.argsort(-scores, axis=1, kind="stable").astype(np.int64)
        ranked = np.array([[f, *[j for j in row if j != f]] for f, row in zip(first, ranked, strict=True)], dtype=np.int64)
        if l == 1 or self.neighbour_temperature is None:
            return ranked[:, :l], scores
        memory_U = self.memory_utilities_.numpy().astype(np.float64)
        sims = _neighbour_keys(features) @ self.memory_keys_.numpy().T
        weights = np.exp((sims - sims.max(axis=1, keepdims=True)) / self.neighbour_temperature)
        weights /= weights.sum(axis=1, keepdims=True)
        picks = np.empty((len(scores), l), dtype=np.int64)
        for q in range(len(scores)):
            chosen = [int(ranked[q, 0])]
            best = memory_U[:, chosen[0]].copy()
            while len(chosen) < l:
                value = weights[q] @ np.maximum(memory_U, best[:, None])  # (k,) weighted best-of after adding j
                value[chosen] = -np.inf
                j = int(np.argmax(value))
                chosen.append(j)
                best = np.maximum(best, memory_U[:, j])
            picks[q] = chosen
        return picks, scores

    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise RuntimeError("this Router is not fitted: call fit() or Router.load() first")

    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``router.json``: hyperparameters, members, input dims; arrays: the network's state dict under
        ``net.*`` and the training memory under ``memory.*``."""
        config = {
            "hyperparameters": self._hyperparameters(),
            "members": self.members_,
            "inputs": self.inputs_,
            "best_epoch": self.best_epoch_,
            "default": self.default_,
            "switch_margin": self.switch_margin_,
            "val_best_of_1": self.val_best_of_1_,
            "val_routed_best_of_1": self.val_routed_best_of_1_,
            "val_default": self.val_default_,
            "torch_version": torch.__version__,
        }
        tensors = {f"net.{k}": v.contiguous() for k, v in self.net_.state_dict().items()}
        tensors |= {"memory.keys": self.memory_keys_.contiguous(), "memory.utilities": self.memory_utilities_.contiguous()}
        return config, tensors

    @classmethod
    def _from_state(cls, config: Mapping[str, Any], arrays: Mapping[str, Any]) -> Self:
        """A ``router.json`` without ``name`` (written before routers had names) loads as this router."""
        router = cls(**config["hyperparameters"])
        router.members_, router.inputs_ = list(config["members"]), {k: int(v) for k, v in config["inputs"].items()}
        router.best_epoch_, router.val_best_of_1_ = config["best_epoch"], config["val_best_of_1"]
        router.default_, router.switch_margin_ = int(config["default"]), float(config["switch_margin"])
        # Saved before these were recorded: unknown (NaN), which ``auto`` router choice never prefers.
        router.val_routed_best_of_1_ = float(config.get("val_routed_best_of_1", float("nan")))
        router.val_default_ = float(config.get("val_default", float("nan")))
        router.net_ = _RouterNet(router.inputs_, len(router.members_), router.hidden, router.embedding_dim, router.dropout)
        router.net_.load_state_dict({k.removeprefix("net."): v for k, v in arrays.items() if k.startswith("net.")})
        router.memory_keys_, router.memory_utilities_ = arrays["memory.keys"], arrays["memory.utilities"]
        router.net_.eval()
        return router
