"""``question_synthesis``: the train and dev questions of a run, labelled, written or judged."""

from ragfolio.pipelines.question_synthesis.pipeline import create_pipeline

__all__ = ["create_pipeline"]
