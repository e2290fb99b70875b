from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.answering_evaluation.nodes import (
    answer_test_questions,
    em_vs_tokens_table,
    plot_em_vs_tokens,
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
                    "cache": "retrieval_cache",
                    "pool_settings": "pool_settings",
                    "router_features": "router_features",
                    "params": "params:answering_evaluation",
                },
                outputs="answers",
                name="answer_test_questions",
            ),
            node(summarize_answers, inputs={"answers": "answers"}, outputs="answer_metrics", name="summarize_answers"),
            node(em_vs_tokens_table, inputs={"metrics": "answer_metrics"}, outputs="em_vs_tokens_data", name="em_vs_tokens_table"),
            node(plot_em_vs_tokens, inputs={"metrics": "answer_metrics"}, outputs="em_vs_tokens_plot", name="plot_em_vs_tokens"),
        ]
    )
