"""The paper's router recipe (mstou/retriever-portfolios, ``portfolio_router.py``), registered as ``paper``.

Architecture: each dense query block (by default the pool's E5 and MiniLM query embeddings; the
paper's frozen FLAN-T5-large + MPNet + E5 encodings where a caller supplies such blocks) is
projected by ``Linear(d, 256) -> ReLU -> Dropout(0.1) -> LayerNorm(256)``; the projections are
concatenated and fused by an MLP (``Linear(256 B, 256) -> ReLU -> Dropout -> Linear(256, 256)``)
into ``z``; member j's score is ``cos(z, e_j) / temperature`` with ``e_j`` one of k learned vectors.

Training, as the official code does it:

* **Multi-positive softmax**: the loss of question q is ``-log sum_{j in W_q} softmax(s_q)_j``
  over its tied winners ``W_q`` (members within ``1e-6`` of the best utility). Questions with no
  winner (best utility 0) or more than ``max_ties`` (3) tied winners are dropped.
* **Binning and caps**: questions are binned by their unique winner (one bin per member); the
  2-way-tie questions form one bin capped at ``cap_2`` (50%) and the 3-way one at ``cap_3`` (10%)
  of the number of unique-winner questions (a seeded subsample).
* **Balanced round-robin batches**: every batch takes an equal share from each non-empty bin,
  cycling through each (reshuffled when it runs out), so rare winners are seen as often as the
  default member's questions, each bin oversampled at most ``max_oversample`` (10) times per epoch.
* **Best epoch on dev**: ``dev_fraction`` of the train questions (seeded) is held out; the epoch
  with the best dev best-of-1 (mean ``U[q, argmax s_q]``) is kept. **No fallback**: the router
  routes to its top-scored members, never held back towards a default member.

One router per portfolio, hence per k (router training fits one per portfolio). Routing to l
members takes the l top-scored. Saved as ``router.json`` + ``router.safetensors``; no pickle.
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

from ragfolio.core.routing.base import (
    Picks,
    RouteInputs,
    check_l,
    check_training_data,
    member_names,
    ranked,
)
from ragfolio.core.routing.determinism import deterministic_fit
from ragfolio.core.routing.routers.learned import tied_best
from ragfolio.core.routing.routers.saved import SavedRouter

logger = logging.getLogger(__name__)



class _PaperNet(nn.Module):
    def __init__(self, inputs: dict[str, int], k: int, width: int, dropout: float) -> None:
        super().__init__()
        self.names = sorted(inputs)
        self.project = nn.ModuleDict({
            name: nn.Sequential(nn.Linear(inputs[name], width), nn.ReLU(), nn.Dropout(dropout), nn.LayerNorm(width))
            for name in self.names
        })
        self.fuse = nn.Sequential(nn.Linear(width * len(self.names), width), nn.ReLU(), nn.Dropout(dropout),
                                  nn.Linear(width, width))
        self.members = nn.Parameter(torch.randn(k, width) / math.sqrt(width))

    def forward(self, blocks: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(batch, k)`` cosine of the fused query with each member vector."""
        z = self.fuse(torch.cat([self.project[name](blocks[name]) for name in self.names], dim=1))
        return nn.functional.normalize(z, dim=1) @ nn.functional.normalize(self.members, dim=1).T


def winner_bins(U: npt.NDArray[np.floating[Any]], *, max_ties: int = 3, cap_2: float = 0.5, cap_3: float = 0.1,
                random_state: int = 0) -> list[npt.NDArray[np.int64]]:
    """The training questions' bins (rows of ``U`` ``(n, k)``): one per member for its unique wins,
    then the 2-way and 3-way ties capped at ``cap_2`` / ``cap_3`` times the unique-winner count.

    Questions with no winner or more than ``max_ties`` tied winners are in no bin; empty bins are left out.
    """
    U = np.asarray(U, dtype=np.float32)
    best = tied_best(U)
    ties = best.sum(axis=1)
    valid = U.max(axis=1) > 0
    rng = np.random.default_rng(random_state)
    unique = valid & (ties == 1)
    bins = [np.flatnonzero(unique & best[:, j]) for j in range(U.shape[1])]
    n_unique = int(unique.sum())
    for size, cap in ((2, cap_2), (3, cap_3)):
        if size > max_ties:
            continue
        rows = np.flatnonzero(valid & (ties == size))
        limit = int(math.floor(cap * n_unique))
        if len(rows) > limit:
            rows = np.sort(rng.choice(rows, size=limit, replace=False))
        bins.append(rows)
    return [b.astype(np.int64) for b in bins if len(b)]


def round_robin_batches(bins: Sequence[npt.NDArray[np.int64]], batch_size: int, max_oversample: float,
                        rng: np.random.Generator) -> list[npt.NDArray[np.int64]]:
    """One epoch of balanced batches: each batch takes ``batch_size / len(bins)`` rows from every bin,
    cycling through each bin in a fresh random order; the epoch draws ``len(bins) * per_bin`` rows, with
    ``per_bin = min(largest bin, max_oversample * smallest bin)``."""
    if not bins:
        return []
    per_bin = int(min(max(len(b) for b in bins), max_oversample * min(len(b) for b in bins)))
    share = max(1, batch_size // len(bins))
    streams = []
    for b in bins:
        reps = -(-per_bin // len(b))
        streams.append(np.concatenate([rng.permutation(b) for _ in range(reps)])[:per_bin])
    out = []
    for start in range(0, per_bin, share):
        out.append(np.concatenate([s[start : start + share] for s in streams]))
    return out


@dataclass
class PaperRouter(SavedRouter):
    """The paper's router (see the module docstring); hyperparameters only until ``fit``.

    Attributes:
        blocks: Dense query blocks read (None: every dense block of the inputs; sparse blocks are skipped).
        width: Projection and fusion width (256 in the paper).
        dropout: Dropout of the projections and the fusion MLP (0.1).
        temperature: Softmax temperature of the cosine scores.
        max_ties, cap_2, cap_3: Dropped and capped ties (see :func:`winner_bins`).
        max_oversample: Most times a bin is repeated in one epoch.
        lr, weight_decay, batch_size, max_epochs: AdamW training.
        dev_fraction: Train questions held out to pick the best epoch by dev best-of-1.
        random_state: Seed of the dev split, initialisation, caps and batches.

    Learned attributes: ``members_``, ``inputs_`` (block -> dim), ``net_``, ``best_epoch_``,
    ``val_best_of_1_`` and ``val_default_`` (dev best-of-1 of the router and of the member with the
    best train mean), ``n_binned_``.
    """

    name: ClassVar[str] = "paper"
    tensors: ClassVar[Literal["numpy", "torch", "none"]] = "torch"
    blocks: list[str] | None = None
    width: int = 256
    dropout: float = 0.1
    temperature: float = 0.05
    max_ties: int = 3
    cap_2: float = 0.5
    cap_3: float = 0.1
    max_oversample: float = 10.0
    lr: float = 1e-3
    weight_decay: float = 0.01
    batch_size: int = 64
    max_epochs: int = 30
    dev_fraction: float = 0.2
    random_state: int = 0
    members_: list[str] = field(default_factory=list, init=False, repr=False)

    def _hyperparameters(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if not k.endswith("_")}

    def _blocks(self, inputs: RouteInputs) -> dict[str, npt.NDArray[np.float32]]:
        names = self.blocks if self.blocks is not None else sorted(
            name for name, block in inputs.query.items() if not sp.issparse(block))
        missing = [name for name in names if name not in inputs.query]
        if missing or not names:
            raise ValueError(f"the paper router reads dense query blocks {names or '(none found)'}; "
                             f"missing {missing}; inputs have {sorted(inputs.query)}")
        return {name: np.asarray(inputs.query[name].toarray() if sp.issparse(inputs.query[name])
                                 else inputs.query[name], dtype=np.float32) for name in names}

    def fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None = None) -> Self:
        """Train on n questions' dense query blocks and their ``(n, k)`` member utilities ``U``.

        Fixed threads, deterministic kernels and a seeded generator of its own for the fit
        (:func:`~ragfolio.core.routing.determinism.deterministic_fit`): the same bits in any process.
        """
        with deterministic_fit(self.random_state):
            return self._fit(inputs, U, members)

    def _fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None) -> Self:
        U = np.asarray(check_training_data(inputs, U), dtype=np.float32)
        n, k = U.shape
        self.members_ = member_names(members, k)
        X = self._blocks(inputs)
        self.inputs_ = {name: int(x.shape[1]) for name, x in X.items()}
        rng = np.random.default_rng(self.random_state)
        order = rng.permutation(n)
        n_dev = int(round(self.dev_fraction * n)) if n >= 10 else 0
        dev, train = np.sort(order[:n_dev]), np.sort(order[n_dev:])
        bins = [train[b] for b in winner_bins(U[train], max_ties=self.max_ties, cap_2=self.cap_2, cap_3=self.cap_3,
                                                random_state=self.random_state)]
        self.n_binned_ = int(sum(len(b) for b in bins))
        best = torch.from_numpy(tied_best(U))
        tensors = {name: torch.from_numpy(x) for name, x in X.items()}
        self.net_ = _PaperNet(self.inputs_, k, self.width, self.dropout)
        optimizer = torch.optim.AdamW(self.net_.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        rows_eval = dev if n_dev else train
        default = int(np.argmax(U[train].mean(axis=0)))
        self.val_default_ = float(U[rows_eval, default].mean())
        best_value, best_state, self.best_epoch_ = -np.inf, None, 0
        for epoch in range(self.max_epochs):
            self.net_.train()
            for batch in round_robin_batches(bins, self.batch_size, self.max_oversample, rng):
                idx = torch.from_numpy(batch)
                logits = self.net_({name: t[idx] for name, t in tensors.items()}) / self.temperature
                log_p = nn.functional.log_softmax(logits, dim=1)
                loss = -torch.logsumexp(log_p.masked_fill(~best[idx], -torch.inf), dim=1).mean()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            value = float(U[rows_eval, self.scores(X, rows_eval).argmax(axis=1)].mean())
            if value > best_value + 1e-12:
                best_value, self.best_epoch_ = value, epoch
                best_state = {name: t.detach().clone() for name, t in self.net_.state_dict().items()}
        if best_state is not None:
            self.net_.load_state_dict(best_state)
        self.net_.eval()
        self.val_best_of_1_ = float(best_value) if np.isfinite(best_value) else self.val_default_
        logger.info("paper router: %d train questions (%d binned in %d bins), %d dev; best epoch %d, dev best-of-1 "
                    "%.3f vs %.3f for the default member", len(train), self.n_binned_, len(bins), n_dev,
                    self.best_epoch_, self.val_best_of_1_, self.val_default_)
        return self

    def scores(self, X: dict[str, npt.NDArray[np.float32]], rows: npt.NDArray[np.int64] | None = None
               ) -> npt.NDArray[np.float32]:
        """``(n, k)`` cosine scores of the rows of the dense blocks ``X``."""
        self._check_fitted()
        for name, dim in self.inputs_.items():
            if name not in X or X[name].shape[1] != dim:
                raise ValueError(f"query block {name!r} must have {dim} columns")
        was_training = self.net_.training
        self.net_.eval()
        with torch.no_grad():
            out = self.net_({name: torch.from_numpy(X[name] if rows is None else X[name][rows]) for name in self.inputs_})
        self.net_.train(was_training)
        return out.numpy()

    def route(self, inputs: RouteInputs, l: int) -> tuple[Picks, npt.NDArray[np.float32]]:
        """``(picks (n, l), scores (n, k))``: the top-l scored members (no fallback to a default)."""
        check_l(l, len(self.members_))
        scores = self.scores({name: np.asarray(inputs.query[name].toarray() if sp.issparse(inputs.query[name])
                                               else inputs.query[name], dtype=np.float32) for name in self.inputs_})
        return ranked(scores, l), scores

    def selection(self) -> dict[str, Any]:
        return {"fallback": False, "val_best_of_1": self.val_best_of_1_, "val_default": self.val_default_,
                "best_epoch": self.best_epoch_}

    def _check_fitted(self) -> None:
        if not hasattr(self, "net_"):
            raise RuntimeError("this PaperRouter is not fitted: call fit() or load() first")

    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        config = {
            "hyperparameters": self._hyperparameters(), "members": self.members_, "inputs": self.inputs_,
            "best_epoch": self.best_epoch_, "val_best_of_1": self.val_best_of_1_, "val_default": self.val_default_,
            "n_binned": self.n_binned_, "torch_version": torch.__version__,
        }
        return config, {k: v.contiguous() for k, v in self.net_.state_dict().items()}

    @classmethod
    def _from_state(cls, config: Mapping[str, Any], arrays: Mapping[str, Any]) -> Self:
        router = cls(**config["hyperparameters"])
        router.members_, router.inputs_ = list(config["members"]), {k: int(v) for k, v in config["inputs"].items()}
        router.best_epoch_, router.n_binned_ = int(config["best_epoch"]), int(config["n_binned"])
        router.val_best_of_1_, router.val_default_ = float(config["val_best_of_1"]), float(config["val_default"])
        router.net_ = _PaperNet(router.inputs_, len(router.members_), router.width, router.dropout)
        router.net_.load_state_dict(dict(arrays))
        router.net_.eval()
        return router
