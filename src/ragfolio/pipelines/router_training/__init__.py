"""``router_training``: one learned router per portfolio, and the routing ablations."""

from ragfolio.pipelines.router_training.pipeline import create_pipeline

__all__ = ["create_pipeline"]
