from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.answering_evaluation.nodes import answer_test_questions
from ragfolio.pipelines.answering_evaluation.report import (
    em_vs_tokens_table,
    plot_em_vs_tokens,
    plot_selector_positions,
    summarize_answers,
)


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            node(
                answer_test_questions,
                inputs={
                    "questions": "questions",
                    "corpora": "corpora",
                    "candidates": "candidates",
                    "utility_index": "utility_index",
                    "portfolios": "portfolios",
                    "routers": "routers",
                    "pre_retrieval_routers": "pre_retrieval_routers",
                    "post_retrieval_routers": "post_retrieval_routers",
                    "cache": "retrieval_cache",
                    "pool_settings": "pool_settings",
                    "router_features": "router_features",
                    "answer_store": "answer_store",
                    "params": "params:answering_evaluation",
                },
                outputs=["answers", "retrieval_orders"],
                name="answer_test_questions",
            ),
            node(
                summarize_answers,
                inputs={"answers": "answers", "retrieval_orders": "retrieval_orders"},
                outputs="answer_metrics",
                name="summarize_answers",
            ),
            node(em_vs_tokens_table, inputs={"metrics": "answer_metrics"}, outputs="em_vs_tokens_data", name="em_vs_tokens_table"),
            node(plot_em_vs_tokens, inputs={"metrics": "answer_metrics"}, outputs="em_vs_tokens_plot", name="plot_em_vs_tokens"),
            node(
                plot_selector_positions, inputs={"metrics": "answer_metrics"}, outputs="selector_positions_plot",
                name="plot_selector_positions",
            ),
        ]
    )
