from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.portfolio_selection.nodes import select_portfolios


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            node(
                select_portfolios,
                inputs={
                    "utility_matrices": "utility_matrices",
                    "utility_index": "utility_index",
                    "params": "params:portfolio_selection",
                },
                outputs="portfolios",
                name="select_portfolios",
            )
        ]
    )
