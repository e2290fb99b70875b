"""Load the raw JSONL questions, split them, and pool each dataset's contexts into a corpus."""

from ragfolio.pipelines.data_prep.pipeline import create_pipeline

__all__ = ["create_pipeline"]
