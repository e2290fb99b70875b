"""``router_evaluation``: every router that ``router_training`` trained, judged on the test questions
beside the ablations and the paper's router, and the router report (``router_metrics``)."""

from ragfolio_lab.pipelines.router_evaluation.pipeline import create_pipeline

__all__ = ["create_pipeline"]
