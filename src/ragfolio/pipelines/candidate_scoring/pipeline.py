from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.candidate_scoring.nodes import expand_candidates, pool_settings, score_candidates


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            node(
                expand_candidates,
                inputs={"params": "params:candidate_scoring", "grids": "params:candidate_grids"},
                outputs="candidates",
                name="expand_candidates",
            ),
            node(
                score_candidates,
                inputs={
                    "questions": "questions",
                    "corpora": "corpora",
                    "candidates": "candidates",
                    "cache": "retrieval_cache",
                    "params": "params:candidate_scoring",
                },
                outputs=["utility_matrices", "utility_index"],
                name="score_candidates",
            ),
            node(
                pool_settings, inputs={"params": "params:candidate_scoring"}, outputs="pool_settings",
                name="pool_settings",
            ),
        ]
    )
