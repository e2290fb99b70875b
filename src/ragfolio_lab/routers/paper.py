"""The paper's router (mstou/retriever-portfolios: ``portfolio_router.py``, ``train_portfolio_router.py``,
the split of ``portfolio_router_data.py``), registered as ``paper``; its defaults are the official code's.

Architecture: each dense query block (by default the pool's E5 and MiniLM query embeddings; the
paper's frozen FLAN-T5-large + MPNet + E5 encodings where a caller supplies such blocks) is
projected by ``Linear(d, 256) -> ReLU -> Dropout(0.1) -> LayerNorm(256)``; the projections are
concatenated and fused by ``Linear(256 B, 256) -> ReLU -> Dropout -> LayerNorm`` then
``Linear(256, 256) -> ReLU -> Dropout -> LayerNorm`` into ``z``; member j's score is
``cos(z, e_j)``, with ``e_j`` one of k learned vectors drawn from ``N(0, 0.02^2)``.

Training, as the official code does it (in brackets, the option giving the earlier port's way):

* **Multi-positive loss** over the tied winners ``W_q`` (members within ``1e-6`` of the best
  utility): the mean over ``j in W_q`` of ``-log softmax(s_q)_j`` on plain cosines
  [``tie_loss="any_winner"``: ``-log sum_{j in W_q} softmax(s_q)_j``; ``temperature``: ``s_q / temperature``].
  Questions with no winner (best utility 0) or more than ``max_ties`` (3) tied winners are dropped.
* **Dev split by winner** (:func:`stratified_split`): 10% of each member's unique wins is dev; 2-
  and 3-way ties are train up to 50% and 10% of the train unique wins, the rest dev
  [``stratify_dev=False``: a random share of all questions, the rest's ties capped by :func:`winner_bins`].
* **Balanced batches** from the bins (each member's unique wins, each tie size): an epoch takes
  ``min(mean bin size, 10 * its size)`` rows from each (:func:`official_quotas`, :func:`quota_batches`)
  [``oversampling="largest_bin"``: ``min(largest bin, 10 * smallest bin)`` from every bin].
* **AdamW** at lr 3e-4, no weight decay, gradient norm clipped at 1.0, batches of 64, 10 epochs.
* **Best epoch on dev**: the epoch with the best dev best-of-1 (mean ``U[q, argmax s_q]``, the
  official "argmax recall") is kept. **No fallback**: the router routes to its top-scored members.

One router per portfolio, hence per k. Routing to l members takes the l top-scored. Saved as
``router.json`` + ``router.safetensors``; no pickle. A router saved before the options existed
loads with the earlier port's (:data:`EARLIER_PORT_OPTIONS`).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, Self, get_args

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
import torch
from torch import nn

from ragfolio.core.routing.base import (
    Picks,
    RouteInputs,
    check_training_data,
    member_names,
    ranked,
)
from ragfolio.core.routing.determinism import deterministic_fit
from ragfolio.core.routing.routers.learned import tied_best
from ragfolio.core.routing.routers.saved import SavedRouter

logger = logging.getLogger(__name__)

Fusion = Literal["official", "plain"]
TieLoss = Literal["mean_over_winners", "any_winner"]
Oversampling = Literal["official", "largest_bin"]
MEMBER_INIT_STD = 0.02  # the official code's member vectors: N(0, 0.02^2)

# How a router saved before these options existed was trained (router.json records its other settings).
EARLIER_PORT_OPTIONS: dict[str, Any] = {"fusion": "plain", "tie_loss": "any_winner", "oversampling": "largest_bin",
                                        "grad_clip": None, "stratify_dev": False}


def _fusion(width: int, n_blocks: int, dropout: float, fusion: Fusion) -> nn.Sequential:
    """The fusion MLP of ``n_blocks`` concatenated projections (see :attr:`PaperRouter.fusion`)."""
    if fusion == "plain":
        return nn.Sequential(nn.Linear(width * n_blocks, width), nn.ReLU(), nn.Dropout(dropout), nn.Linear(width, width))
    return nn.Sequential(nn.Linear(width * n_blocks, width), nn.ReLU(), nn.Dropout(dropout), nn.LayerNorm(width),
                         nn.Linear(width, width), nn.ReLU(), nn.Dropout(dropout), nn.LayerNorm(width))


class _PaperNet(nn.Module):
    def __init__(self, inputs: dict[str, int], k: int, width: int, dropout: float, fusion: Fusion) -> None:
        super().__init__()
        self.names = sorted(inputs)
        self.project = nn.ModuleDict({
            name: nn.Sequential(nn.Linear(inputs[name], width), nn.ReLU(), nn.Dropout(dropout), nn.LayerNorm(width))
            for name in self.names
        })
        self.fuse = _fusion(width, len(self.names), dropout, fusion)
        self.members = nn.Parameter(torch.randn(k, width) * MEMBER_INIT_STD)

    def forward(self, blocks: dict[str, torch.Tensor]) -> torch.Tensor:
        """``(batch, k)`` cosine of the fused query with each member vector."""
        z = self.fuse(torch.cat([self.project[name](blocks[name]) for name in self.names], dim=1))
        return nn.functional.normalize(z, dim=1) @ nn.functional.normalize(self.members, dim=1).T


def winner_groups(U: npt.NDArray[np.floating[Any]], max_ties: int = 3
                  ) -> tuple[list[npt.NDArray[np.int64]], dict[int, npt.NDArray[np.int64]]]:
    """``(unique, tied)``: the rows of ``U`` ``(n, k)`` each member wins alone (one array per member),
    and by tie size (2 and 3, up to ``max_ties``) the rows with that many tied winners.

    Rows with no winner (best utility 0) or more than ``max_ties`` tied winners are in neither.
    """
    U = np.asarray(U, dtype=np.float32)
    best = tied_best(U)
    ties = best.sum(axis=1)
    valid = U.max(axis=1) > 0
    unique = [np.flatnonzero(valid & (ties == 1) & best[:, j]) for j in range(U.shape[1])]
    tied = {size: np.flatnonzero(valid & (ties == size)) for size in (2, 3) if size <= max_ties}
    return unique, tied


def winner_bins(U: npt.NDArray[np.floating[Any]], *, max_ties: int = 3, cap_2: float = 0.5, cap_3: float = 0.1,
                random_state: int = 0) -> list[npt.NDArray[np.int64]]:
    """The earlier port's bins of the training questions (rows of ``U`` ``(n, k)``): one per member
    for its unique wins, then the 2-way (3-way) ties, a seeded subsample of at most
    ``floor(cap_2 (cap_3) * unique wins)`` rows. Empty bins are left out (see :func:`winner_groups`).
    """
    unique, tied = winner_groups(U, max_ties)
    n_unique = sum(len(rows) for rows in unique)
    rng = np.random.default_rng(random_state)
    bins = list(unique)
    for size, rows in tied.items():
        limit = int(math.floor({2: cap_2, 3: cap_3}[size] * n_unique))
        bins.append(np.sort(rng.choice(rows, size=limit, replace=False)) if len(rows) > limit else rows)
    return [b.astype(np.int64) for b in bins if len(b)]


def stratified_split(U: npt.NDArray[np.floating[Any]], dev_fraction: float, rng: np.random.Generator, *,
                     max_ties: int = 3, cap_2: float = 0.5, cap_3: float = 0.1
                     ) -> tuple[list[npt.NDArray[np.int64]], npt.NDArray[np.int64]]:
    """``(train bins, dev rows)`` of the rows of ``U`` ``(n, k)``, split by winner as the official code does.

    Each member's unique wins (:func:`winner_groups`) are shuffled and ``round(dev_fraction * size)``
    go to dev, the rest form its train bin. Of the 2-way (3-way) ties, a shuffled
    ``min(round(cap_2 (cap_3) * train unique wins), floor((1 - dev_fraction) * size))`` form the
    train bin and the rest go to dev. Rows in no group are in neither; empty bins are left out.
    """
    unique, tied = winner_groups(U, max_ties)
    bins, dev = [], []
    for rows in unique:
        rows = rng.permutation(rows)
        n_dev = int(round(dev_fraction * len(rows)))
        dev.append(rows[:n_dev])
        bins.append(np.sort(rows[n_dev:]))
    n_unique = sum(len(b) for b in bins)
    for size, rows in tied.items():
        rows = rng.permutation(rows)
        n_train = min(int(round({2: cap_2, 3: cap_3}[size] * n_unique)), math.floor((1 - dev_fraction) * len(rows)))
        bins.append(np.sort(rows[:n_train]))
        dev.append(rows[n_train:])
    return [b.astype(np.int64) for b in bins if len(b)], np.sort(np.concatenate(dev)).astype(np.int64)


def official_quotas(sizes: Sequence[int], max_oversample: float) -> list[int]:
    """Rows each bin (of ``sizes``) gives an epoch in the official sampler:
    ``floor(min(mean bin size, max_oversample * its own size))``."""
    mean = sum(sizes) / len(sizes)
    return [int(math.floor(min(mean, max_oversample * size))) for size in sizes]


def quota_batches(bins: Sequence[npt.NDArray[np.int64]], quotas: Sequence[int], batch_size: int,
                  rng: np.random.Generator) -> list[npt.NDArray[np.int64]]:
    """One epoch as the official sampler draws it: ``ceil(sum(quotas) / batch_size)`` batches (fewer when
    every quota is spent), each splitting ``batch_size`` evenly over the bins whose quota is not yet
    drawn (the remainder to the first few, the first moving on by one each batch); each bin is read in a
    fresh random order, reshuffled when it runs out, and gives at most its quota."""
    streams = [np.concatenate([rng.permutation(b) for _ in range(-(-q // len(b)))])[:q]
               for b, q in zip(bins, quotas, strict=True)]
    drawn, offset, out = [0] * len(bins), 0, []
    for _ in range(-(-sum(quotas) // batch_size)):
        active = [i for i in range(len(bins)) if drawn[i] < quotas[i]]
        if not active:
            break
        base, remainder = divmod(batch_size, len(active))
        order = list(range(len(active)))
        extra = set((order[offset:] + order[:offset])[:remainder])
        offset = (offset + 1) % len(active)
        batch = []
        for position, i in enumerate(active):
            take = min(base + (position in extra), quotas[i] - drawn[i])
            batch.append(streams[i][drawn[i] : drawn[i] + take])
            drawn[i] += take
        out.append(np.concatenate(batch))
    return out


def round_robin_batches(bins: Sequence[npt.NDArray[np.int64]], batch_size: int, max_oversample: float,
                        rng: np.random.Generator) -> list[npt.NDArray[np.int64]]:
    """One epoch of the earlier port's balanced batches: each batch takes ``batch_size / len(bins)`` rows
    from every bin, cycling through each bin in a fresh random order; the epoch draws ``len(bins) * per_bin``
    rows, with ``per_bin = min(largest bin, max_oversample * smallest bin)``."""
    if not bins:
        return []
    per_bin = int(min(max(len(b) for b in bins), max_oversample * min(len(b) for b in bins)))
    share = max(1, batch_size // len(bins))
    streams = [np.concatenate([rng.permutation(b) for _ in range(-(-per_bin // len(b)))])[:per_bin] for b in bins]
    return [np.concatenate([s[start : start + share] for s in streams]) for start in range(0, per_bin, share)]


@dataclass
class PaperRouter(SavedRouter):
    """The paper's router (see the module docstring); hyperparameters only until ``fit``. The defaults are
    the official code's; "the earlier port" names the other value each option had before.

    Attributes:
        blocks: Dense query blocks read (None: every dense block of the inputs; sparse blocks are skipped).
        width: Projection and fusion width (256).
        dropout: Dropout of the projections and the fusion MLP (0.1).
        fusion: ``official``: ``Linear -> ReLU -> Dropout -> LayerNorm``, twice; ``plain`` (the earlier
            port): ``Linear -> ReLU -> Dropout -> Linear``, no LayerNorm.
        temperature: None: the loss reads plain cosines; a number divides them by it first (the earlier
            port: 0.05). Routing ranks by the cosines either way.
        tie_loss: ``mean_over_winners``: the mean of ``-log p_j`` over the tied winners j;
            ``any_winner`` (the earlier port): ``-log`` of the tied winners' summed probability.
        max_ties, cap_2, cap_3: Dropped and capped ties (see :func:`stratified_split`, :func:`winner_bins`).
        oversampling: Rows each bin gives an epoch: ``official``, ``min(mean bin size, max_oversample *
            its size)`` (:func:`official_quotas`, :func:`quota_batches`); ``largest_bin`` (the earlier
            port), ``min(largest bin, max_oversample * smallest bin)`` (:func:`round_robin_batches`).
        max_oversample: The oversampling cap (10).
        lr, weight_decay, batch_size, max_epochs: AdamW training (3e-4, 0, 64, 10; the earlier port:
            1e-3, 0.01, 64, 30).
        grad_clip: Largest gradient norm (1.0); None: no clipping (the earlier port).
        dev_fraction: Share held out to pick the best epoch by dev best-of-1 (0.1; the earlier port: 0.2).
        stratify_dev: True: that share of each member's unique wins, and the ties beyond the caps
            (:func:`stratified_split`); False (the earlier port): that share of all questions, at
            random, none below 10 questions.
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
    fusion: Fusion = "official"
    temperature: float | None = None
    tie_loss: TieLoss = "mean_over_winners"
    max_ties: int = 3
    cap_2: float = 0.5
    cap_3: float = 0.1
    oversampling: Oversampling = "official"
    max_oversample: float = 10.0
    lr: float = 3e-4
    weight_decay: float = 0.0
    grad_clip: float | None = 1.0
    batch_size: int = 64
    max_epochs: int = 10
    dev_fraction: float = 0.1
    stratify_dev: bool = True
    random_state: int = 0
    members_: list[str] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        for option, allowed in (("fusion", Fusion), ("tie_loss", TieLoss), ("oversampling", Oversampling)):
            if getattr(self, option) not in get_args(allowed):
                raise ValueError(f"PaperRouter {option} must be one of {get_args(allowed)}, not {getattr(self, option)!r}")

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

    def _split(self, U: npt.NDArray[np.float32], rng: np.random.Generator
               ) -> tuple[list[npt.NDArray[np.int64]], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``(bins, train, dev)``: the train bins, the rows not held out, and the dev rows (see ``stratify_dev``)."""
        n = len(U)
        if self.stratify_dev:
            bins, dev = stratified_split(U, self.dev_fraction, rng, max_ties=self.max_ties, cap_2=self.cap_2,
                                         cap_3=self.cap_3)
            return bins, np.setdiff1d(np.arange(n), dev).astype(np.int64), dev
        order = rng.permutation(n)
        n_dev = int(round(self.dev_fraction * n)) if n >= 10 else 0
        dev, train = np.sort(order[:n_dev]), np.sort(order[n_dev:])
        bins = [train[b] for b in winner_bins(U[train], max_ties=self.max_ties, cap_2=self.cap_2, cap_3=self.cap_3,
                                                random_state=self.random_state)]
        return bins, train, dev

    def _batches(self, bins: Sequence[npt.NDArray[np.int64]], rng: np.random.Generator) -> list[npt.NDArray[np.int64]]:
        """One epoch's batches of train rows (see ``oversampling``)."""
        if self.oversampling == "largest_bin" or not bins:
            return round_robin_batches(bins, self.batch_size, self.max_oversample, rng)
        return quota_batches(bins, official_quotas([len(b) for b in bins], self.max_oversample), self.batch_size, rng)

    def _loss(self, cosines: torch.Tensor, winners: torch.Tensor) -> torch.Tensor:
        """The batch's mean loss of its ``(batch, k)`` cosines against its tied-winner mask (see ``tie_loss``)."""
        log_p = nn.functional.log_softmax(cosines if self.temperature is None else cosines / self.temperature, dim=1)
        if self.tie_loss == "any_winner":
            return -torch.logsumexp(log_p.masked_fill(~winners, -torch.inf), dim=1).mean()
        return -((log_p * winners).sum(dim=1) / winners.sum(dim=1)).mean()

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
        bins, train, dev = self._split(U, rng)
        self.n_binned_ = int(sum(len(b) for b in bins))
        best = torch.from_numpy(tied_best(U))
        tensors = {name: torch.from_numpy(x) for name, x in X.items()}
        self.net_ = _PaperNet(self.inputs_, k, self.width, self.dropout, self.fusion)
        optimizer = torch.optim.AdamW(self.net_.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        rows_eval = dev if len(dev) else train
        default = int(np.argmax(U[train].mean(axis=0)))
        self.val_default_ = float(U[rows_eval, default].mean())
        best_value, best_state, self.best_epoch_ = -np.inf, None, 0
        for epoch in range(self.max_epochs):
            self.net_.train()
            for batch in self._batches(bins, rng):
                idx = torch.from_numpy(batch)
                loss = self._loss(self.net_({name: t[idx] for name, t in tensors.items()}), best[idx])
                optimizer.zero_grad()
                loss.backward()
                if self.grad_clip is not None:
                    nn.utils.clip_grad_norm_(self.net_.parameters(), self.grad_clip)
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
                    "%.3f vs %.3f for the default member", len(train), self.n_binned_, len(bins), len(dev),
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

    def _route(self, inputs: RouteInputs, l: int) -> tuple[Picks, npt.NDArray[np.float32]]:
        """``(picks (n, l), scores (n, k))``: the top-l scored members (no fallback to a default)."""
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
        router = cls(**{**EARLIER_PORT_OPTIONS, **config["hyperparameters"]})
        router.members_, router.inputs_ = list(config["members"]), {k: int(v) for k, v in config["inputs"].items()}
        router.best_epoch_, router.n_binned_ = int(config["best_epoch"]), int(config["n_binned"])
        router.val_best_of_1_, router.val_default_ = float(config["val_best_of_1"]), float(config["val_default"])
        router.net_ = _PaperNet(router.inputs_, len(router.members_), router.width, router.dropout, router.fusion)
        router.net_.load_state_dict(dict(arrays))
        router.net_.eval()
        return router
