"""Expand the candidate grid, run every candidate on every question, build the utility matrices."""

from ragfolio.pipelines.candidate_scoring.pipeline import create_pipeline

__all__ = ["create_pipeline"]
