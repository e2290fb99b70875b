from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.core.timings import split_timings
from ragfolio_lab.pipelines.router_evaluation.nodes import compare_on_test, evaluate_routers
from ragfolio_lab.pipelines.router_evaluation.paper_blocks import build_paper_blocks
from ragfolio_lab.pipelines.router_evaluation.paper_comparison import compare_paper_routers
from ragfolio_lab.pipelines.router_evaluation.report_views import headline_routers, plot_router_curves
from ragfolio_lab.pipelines.router_evaluation.retrieval_comparison import cascade_curves, compare_retrieval_routers

ROWS = {
    "router_inputs": "router_inputs",
    "utility_matrices": "utility_matrices",
    "utility_index": "utility_index",
    "portfolios": "portfolios",
}


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            node(
                compare_on_test,
                inputs={**ROWS, "routers": "routers", "params": "params:router_training"},
                outputs="query_router_comparison",
                name="compare_on_test",
            ),
            node(  # the paper router's own query encodings (mpnet, gemma) and each block's cost; {} when off
                build_paper_blocks,
                inputs={
                    "questions": "questions", "utility_index": "utility_index", "pool_settings": "pool_settings",
                    "router_features": "router_features", "paper_router": "params:paper_router",
                    "params": "params:router_training", "cache": "retrieval_cache",
                },
                outputs=["paper_query_blocks", "paper_encoders", "paper_block_cost"],
                name="build_paper_blocks",
            ),
            node(
                compare_paper_routers,
                inputs={
                    **ROWS, "router_inputs": "router_inputs", "paper_query_blocks": "paper_query_blocks",
                    "query_router_comparison": "query_router_comparison", "paper_router": "params:paper_router",
                    "params": "params:router_training",
                },
                outputs=["paper_router_comparison", "universal_routing"],
                name="compare_paper_routers",
            ),
            node(
                compare_retrieval_routers,
                inputs={
                    **ROWS, "query_router_comparison": "paper_router_comparison",
                    "retrieval_inputs": "retrieval_inputs", "retrieval_routers": "retrieval_routers",
                },
                outputs="router_comparison",
                name="compare_retrieval_routers",
            ),
            node(  # the cascade's test best-of-1 by members run, m = 1..k
                cascade_curves,
                inputs={**ROWS, "retrieval_inputs": "retrieval_inputs", "retrieval_routers": "retrieval_routers"},
                outputs="cascade_curves",
                name="cascade_curves",
            ),
            node(
                evaluate_routers,
                inputs={
                    "router_comparison": "router_comparison", "dev_comparison": "dev_router_comparison",
                    "questions": "questions", "corpora": "corpora",
                    "candidates": "candidates", "utility_index": "utility_index", "portfolios": "portfolios",
                    "pool_settings": "pool_settings", "router_selection": "router_selection",
                    "retrieval_inputs": "retrieval_inputs", "cache": "retrieval_cache", "params": "params:router_training",
                    "universal_routing": "universal_routing", "paper_encoders": "paper_encoders",
                    "paper_block_cost": "paper_block_cost", "retrieval_feature_cost": "retrieval_feature_cost",
                    "cascade_curves": "cascade_curves",
                },
                outputs="router_report",
                name="evaluate_routers",
            ),
            # the measured feature costs go to a file of their own, so router_metrics.json reproduces to the byte
            node(split_timings, inputs="router_report", outputs=["router_metrics", "router_timings"],
                 name="split_router_timings"),
            node(headline_routers, inputs={"metrics": "router_metrics"}, outputs="router_headline",
                 name="headline_routers"),
            node(plot_router_curves, inputs={"metrics": "router_metrics"}, outputs="router_plot", name="plot_router_curves"),
        ]
    )
