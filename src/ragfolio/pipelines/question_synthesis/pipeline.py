from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.question_synthesis.nodes import synthesize_questions


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            node(
                synthesize_questions,
                inputs={"labelled": "labelled_questions", "corpora": "corpora", "store": "synthesis_store",
                        "cache": "retrieval_cache", "params": "params:question_synthesis"},
                outputs=["questions", "synthesis_report"],
                name="synthesize_questions",
            ),
        ]
    )
