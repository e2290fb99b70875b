"""``router_training``: one learned router per portfolio, the routing ablations, and which router to serve
(``router_selection``, which ``packaging`` builds the bundle of)."""

from ragfolio.pipelines.router_training.pipeline import create_pipeline

__all__ = ["create_pipeline"]
