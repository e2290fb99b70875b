from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.portfolio_selection.nodes import sample_queries, select_portfolios


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            node(
                sample_queries,
                inputs={"utility_index": "utility_index", "params": "params:portfolio_selection"},
                outputs="query_sample",
                name="sample_queries",
            ),
            node(
                select_portfolios,
                inputs={
                    "utility_matrices": "utility_matrices",
                    "utility_index": "utility_index",
                    "query_sample": "query_sample",
                    "params": "params:portfolio_selection",
                },
                outputs="portfolios",
                name="select_portfolios",
            )
        ]
    )
