"""Parameters of the paper's router study (conf/base/parameters_paper_router.yml, ``paper_router``).

The paper's router is judged beside the servable ones on test, never served, so its settings are
the lab's: a block of their own, read by ``router_evaluation`` with ``router_training``'s ``seed`` and
``encoders`` (the pool's query blocks it may read). ``null``: the study is off.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragfolio_lab.routers.paper import PaperRouter
from ragfolio_lab.routers.paper_encoders import PAPER_ENCODERS

PAPER_HYPERPARAMETERS = frozenset(f.name for f in fields(PaperRouter) if f.init) - {"blocks"}


class PaperRouterParams(BaseModel):
    """The paper's router (``paper_router``): its query encoders, the universal router, and
    :class:`~ragfolio_lab.routers.paper.PaperRouter` hyperparameters beside them
    (``{max_epochs: 30, lr: 0.003}``). Other keys are refused by name, as ``extra="forbid"`` would
    refuse them."""

    model_config = ConfigDict(frozen=True, extra="allow")

    # Query blocks, by name: router_training.encoders' (the pool's query embeddings), mpnet
    # (all-mpnet-base-v2, optional packages) or gemma (the embedded Gemma-3-270M, mean-pooled).
    # None: every router_training.encoders block (E5 and MiniLM by default).
    encoders: list[str] | None = None
    universal: bool = False  # also one router over every dataset's train questions, judged per dataset
    timing_queries: int = Field(64, ge=1)  # questions each encoder is timed on (ms/query, batched)

    @model_validator(mode="after")
    def _known_keys(self) -> PaperRouterParams:
        if unknown := sorted(set(self.model_extra or {}) - PAPER_HYPERPARAMETERS):
            raise ValueError(f"paper_router keys {unknown} are neither encoders, universal, "
                             f"timing_queries nor PaperRouter hyperparameters {sorted(PAPER_HYPERPARAMETERS)}")
        if self.encoders is not None and not self.encoders:
            raise ValueError("paper_router.encoders=[] names no query block (null: the pool's)")
        return self

    @property
    def hyperparameters(self) -> dict[str, Any]:
        """The :class:`~ragfolio_lab.routers.paper.PaperRouter` keyword arguments given."""
        return dict(self.model_extra or {})


def paper_router_params(block: dict[str, Any] | None, pool_encoders: Sequence[str]) -> PaperRouterParams | None:
    """The ``paper_router`` block, validated against the pool's query blocks (``router_training.encoders``);
    ``None`` when the study is off.

    Raises:
        ValueError: A key is unknown, or an encoder is neither the pool's nor the paper router's own.
    """
    if block is None:
        return None
    paper = PaperRouterParams(**block)
    known = [*pool_encoders, *(name for name in PAPER_ENCODERS if name not in pool_encoders)]
    if unknown := [name for name in paper.encoders or [] if name not in known]:
        raise ValueError(f"paper_router.encoders {unknown} are not query blocks: known are {known} "
                         "(router_training.encoders, then the paper router's own)")
    return paper
