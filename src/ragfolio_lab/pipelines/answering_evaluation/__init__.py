"""``answering_evaluation``: EM/F1, latency and tokens of every system on test questions, with the LLM."""

from ragfolio_lab.pipelines.answering_evaluation.pipeline import create_pipeline

__all__ = ["create_pipeline"]
