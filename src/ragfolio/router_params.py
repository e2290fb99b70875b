"""Parameters of ``router_training`` (conf/base/parameters_router_training.yml), validated at the node boundary.

Two stages read the block: ``router_training`` trains and chooses under it, ``router_evaluation`` judges
on test with its ``seed``, ``logistic_c`` and ``bundle``, each read on its own
(``params:router_training.seed``, ...); kept here so that neither pipeline imports the other (as
:mod:`ragfolio.bundle_params` is for ``packaging``).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragfolio.bundle_params import BundleParams
from ragfolio.core.routing.features.query_features import TextHasher
from ragfolio.core.routing.features.router_features import RetrievalFeatureSettings
from ragfolio.core.routing.registry import check_servable, import_router_modules
from ragfolio.core.routing.routers.cascade import CascadeRouter
from ragfolio.core.routing.routers.learned import Router
from ragfolio.core.routing.routers.retrieval_routers import PostRetrievalRouter, PreRetrievalRouter
from ragfolio.param_blocks import checked_block, kwargs_model, kwargs_of

logger = logging.getLogger(__name__)


class RetrievalRoutingParams(BaseModel):
    """The servable routers beside the learned one (``router_training.retrieval_routing``): the
    features' settings, then each router kind's hyperparameters by its name (``pre_retrieval``,
    ``post_retrieval``, ``cascade`` with its two stages' under ``pre`` and ``post``, and a user's
    routers from ``router_modules``)."""

    model_config = ConfigDict(frozen=True, extra="allow")

    agreement_depth: int = Field(10, ge=1)
    query_block_size: int = Field(256, ge=1)
    list_judgements: bool = False  # the cross-encoder's judgement of each member's list, when one was trained
    pre_retrieval: Annotated[dict[str, Any], kwargs_of(
        PreRetrievalRouter, "router_training.retrieval_routing.pre_retrieval")] = Field(default_factory=dict)
    post_retrieval: Annotated[dict[str, Any], kwargs_of(
        PostRetrievalRouter, "router_training.retrieval_routing.post_retrieval")] = Field(default_factory=dict)
    cascade: Annotated[dict[str, Any], kwargs_of(
        CascadeRouter, "router_training.retrieval_routing.cascade")] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _cascade_stages(self) -> RetrievalRoutingParams:
        for stage, cls in (("pre", PreRetrievalRouter), ("post", PostRetrievalRouter)):
            checked_block(kwargs_model(cls), self.cascade.get(stage) or {},
                          f"router_training.retrieval_routing.cascade.{stage}")
        return self

    @model_validator(mode="after")
    def _servable_kinds(self) -> RetrievalRoutingParams:
        for kind, block in (self.model_extra or {}).items():
            check_servable(kind, f"router_training.retrieval_routing.{kind}")
            if not isinstance(block, dict):
                raise ValueError(f"router_training.retrieval_routing.{kind} must be a mapping of hyperparameters")
        return self

    def hyperparameters(self, kind: str) -> dict[str, Any]:
        """The hyperparameters given for router ``kind`` (none: its defaults)."""
        block = getattr(self, kind, None) if kind in type(self).model_fields else (self.model_extra or {}).get(kind)
        return dict(block or {})


class RouterTrainingParams(BaseModel):
    """``router_training`` parameters (conf/base/parameters_router_training.yml).

    ``router_modules`` are imported before anything else is read, so the routers they register are
    servable names the other settings may use."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    router_modules: list[str] = Field(default_factory=list)  # modules registering a user's routers

    text_features: Annotated[dict[str, Any], kwargs_of(TextHasher, "router_training.text_features")] = Field(
        default_factory=dict)
    encoders: list[str] = Field(default_factory=lambda: ["minilm", "e5"])
    router: Annotated[dict[str, Any], kwargs_of(Router, "router_training.router")] = Field(default_factory=dict)
    logistic_c: float = Field(1.0, gt=0)
    retrieval_routing: RetrievalRoutingParams = Field(default_factory=RetrievalRoutingParams)
    bundle: BundleParams = Field(default_factory=BundleParams)
    seed: int = 42

    @model_validator(mode="before")
    @classmethod
    def _import_router_modules(cls, data: Any) -> Any:
        if isinstance(data, dict):
            import_router_modules(data.get("router_modules") or [])
        return data

    @model_validator(mode="after")
    def _served_router_exists(self) -> RouterTrainingParams:
        if self.bundle.router != "auto":
            check_servable(self.bundle.router, "router_training.bundle.router")
        return self

    def retrieval_features(self, cross_encoder: str | None) -> RetrievalFeatureSettings:
        """The retrieval routers' featurizer: list judgements when asked for and candidate scoring trained
        a cross-encoder (``cross_encoder``: ``PoolSettings.cross_encoder``), else without them, saying so."""
        r = self.retrieval_routing
        judge = r.list_judgements and cross_encoder is not None
        if r.list_judgements and not judge:
            logger.info("routing features: no list judgements, as candidate scoring trained no cross-encoder "
                        "(candidate_scoring.cross_encoder.train: always trains one)")
        return RetrievalFeatureSettings(tuple(self.encoders), r.agreement_depth, judge)
