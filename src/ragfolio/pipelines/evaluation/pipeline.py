from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.evaluation.nodes import (
    best_of_k_table,
    evaluate_portfolios,
    headline_portfolios,
    plot_best_of_k,
    plot_sample_complexity,
    plot_winners,
    study_sample_complexity,
)

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
            node(headline_portfolios, inputs={"metrics": "portfolio_metrics"}, outputs="portfolio_headline",
                 name="headline_portfolios"),
            node(plot_best_of_k, inputs={"metrics": "portfolio_metrics"}, outputs="best_of_k_plot", name="plot_best_of_k"),
            node(best_of_k_table, inputs={"metrics": "portfolio_metrics"}, outputs="best_of_k_data", name="best_of_k_table"),
            node(plot_winners, inputs=UTILITY, outputs="winners_heatmap", name="plot_winners"),
            node(
                study_sample_complexity,
                inputs={**UTILITY, "params": "params:evaluation"},
                outputs="sample_complexity",
                name="study_sample_complexity",
            ),
            node(
                plot_sample_complexity,
                inputs={"study": "sample_complexity"},
                outputs="sample_complexity_plot",
                name="plot_sample_complexity",
            ),
        ]
    )
