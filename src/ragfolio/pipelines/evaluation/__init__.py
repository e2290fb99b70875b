"""Evaluate the selected portfolios on train and test questions; write the report and plots."""

from ragfolio.pipelines.evaluation.pipeline import create_pipeline

__all__ = ["create_pipeline"]
