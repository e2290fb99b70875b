"""``router_training``: one learned router per portfolio and the servable routers beside it, trained on
train and judged on dev only, and which router to serve (``router_selection``, which ``packaging``
builds the bundle of); ``router_evaluation`` judges them on test."""

from ragfolio.pipelines.router_training.pipeline import create_pipeline

__all__ = ["create_pipeline"]
