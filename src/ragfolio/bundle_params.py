"""What is served (``router_training.bundle``): the one parameter block three stages read.

``router_training`` chooses the router under it (``router: auto`` or a servable router's name);
``router_evaluation`` reports what is served of ``portfolio`` on test; ``packaging`` builds that
portfolio's bundle with the ``default_l`` router training chose under it. Each validates the block with :class:`BundleParams`, kept
here so that no pipeline imports another.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ragfolio.core.scoring.utility_index import ALL


class BundleParams(BaseModel):
    """What the served bundle holds (``router_training.bundle``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    portfolio: str = ALL
    # the default l of a named router, and of auto where no l has dev evidence (auto serves the smallest
    # l with evidence otherwise: ragfolio.core.routing.judging.choice)
    default_l: int = Field(2, ge=1)
    # auto: the router with the largest gain over the default member on the dev questions (validation
    # inside train without a dev split; ragfolio.core.routing.judging.choice); or a servable router by
    # name (ragfolio.core.routing.registry.servable_names: learned, pre_retrieval, post_retrieval, a user's),
    # checked by router_training's parameters once its router_modules are imported
    router: str = "auto"
    # auto chooses only among routers that run at most this many members for a query routed to one
    # member (the cascade its shortlist, post_retrieval all k, the query-only routers one); None: no limit
    max_members_run: int | None = Field(None, ge=1)
    # the seed of the order the selector is shown candidate answers in, recorded in the bundle:
    # answering_evaluation and the service both answer with the bundle's
    selector_seed: int = 42
