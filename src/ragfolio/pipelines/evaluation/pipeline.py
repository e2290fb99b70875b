from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.evaluation.nodes import best_of_k_table, evaluate_portfolios, plot_best_of_k, plot_winners

UTILITY = {"utility_matrices": "utility_matrices", "utility_index": "utility_index", "portfolios": "portfolios"}


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            node(
                evaluate_portfolios,
                inputs={**UTILITY, "candidates": "candidates", "params": "params:evaluation"},
                outputs="portfolio_metrics",
                name="evaluate_portfolios",
            ),
            node(plot_best_of_k, inputs={"metrics": "portfolio_metrics"}, outputs="best_of_k_plot", name="plot_best_of_k"),
            node(best_of_k_table, inputs={"metrics": "portfolio_metrics"}, outputs="best_of_k_data", name="best_of_k_table"),
            node(plot_winners, inputs=UTILITY, outputs="winners_heatmap", name="plot_winners"),
        ]
    )
