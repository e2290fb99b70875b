from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.candidate_scoring.nodes import expand_candidates, pool_settings, score_candidates
from ragfolio.pipelines.candidate_scoring.reranker_training import train_cross_encoder


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
                train_cross_encoder,
                inputs={
                    "questions": "questions",
                    "corpora": "corpora",
                    "candidates": "candidates",
                    "cache": "retrieval_cache",
                    "params": "params:candidate_scoring",
                },
                outputs=["cross_encoder", "cross_encoder_folds"],
                name="train_cross_encoder",
            ),
            node(
                score_candidates,
                inputs={
                    "questions": "questions",
                    "corpora": "corpora",
                    "candidates": "candidates",
                    "cache": "retrieval_cache",
                    "params": "params:candidate_scoring",
                    "pool_settings": "pool_settings",  # with the cross-encoder's folders: what later stages run with
                },
                outputs=["utility_matrices", "utility_index"],
                name="score_candidates",
            ),
            node(
                pool_settings,
                inputs={"params": "params:candidate_scoring", "cross_encoder": "cross_encoder",
                        "cross_encoder_folds": "cross_encoder_folds"},
                outputs="pool_settings",
                name="pool_settings",
            ),
        ]
    )
