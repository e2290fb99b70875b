from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.core.timings import split_timings
from ragfolio.stage_records import routing_rows_node, scored_pool_node
from ragfolio_lab.pipelines.router_evaluation.nodes import (
    compare_on_test,
    evaluate_routers,
    portfolio_reports,
    router_feature_report,
    same_budget_on_test,
)
from ragfolio_lab.pipelines.router_evaluation.report_views import headline_routers, plot_router_curves
from ragfolio_lab.pipelines.router_evaluation.retrieval_comparison import cascade_curves, compare_retrieval_routers
from ragfolio_lab.routers.paper_blocks import build_paper_blocks
from ragfolio_lab.routers.paper_comparison import compare_paper_routers

SEED = "params:router_training.seed"


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            routing_rows_node(),
            scored_pool_node(),
            node(
                compare_on_test,
                inputs={"routing_rows": "routing_rows", "routers": "routers", "seed": SEED,
                        "logistic_c": "params:router_training.logistic_c"},
                outputs="query_router_comparison",
                name="compare_on_test",
            ),
            node(  # the paper router's own query encodings (mpnet, gemma) and each block's cost; {} when off
                build_paper_blocks,
                inputs={
                    "questions": "questions", "utility_index": "utility_index", "pool_settings": "pool_settings",
                    "router_features": "router_features", "paper_router": "params:paper_router",
                    "cache": "retrieval_cache",
                },
                outputs=["paper_query_blocks", "paper_encoders", "paper_block_cost"],
                name="build_paper_blocks",
            ),
            node(
                compare_paper_routers,
                inputs={"routing_rows": "routing_rows", "paper_query_blocks": "paper_query_blocks",
                        "query_router_comparison": "query_router_comparison",
                        "paper_router": "params:paper_router", "seed": SEED,
                        "encoders": "params:router_training.encoders"},
                outputs=["paper_router_comparison", "universal_routing"],
                name="compare_paper_routers",
            ),
            node(
                compare_retrieval_routers,
                inputs={"query_router_comparison": "paper_router_comparison", "routing_rows": "routing_rows",
                        "retrieval_routers": "retrieval_routers"},
                outputs="router_comparison",
                name="compare_retrieval_routers",
            ),
            node(  # the cascade's test best-of-1 by members run, m = 1..k
                cascade_curves,
                inputs={"routing_rows": "routing_rows", "retrieval_routers": "retrieval_routers"},
                outputs="cascade_curves",
                name="cascade_curves",
            ),
            node(
                same_budget_on_test,
                inputs={"router_comparison": "router_comparison", "router_selection": "router_selection",
                        "questions": "questions", "routing_rows": "routing_rows", "scored_pool": "scored_pool"},
                outputs="test_same_budget",
                name="same_budget_on_test",
            ),
            node(
                portfolio_reports,
                inputs={"router_comparison": "router_comparison", "test_same_budget": "test_same_budget",
                        "dev_comparison": "dev_router_comparison", "router_selection": "router_selection",
                        "cascade_curves": "cascade_curves", "universal_routing": "universal_routing"},
                outputs="portfolio_reports",
                name="portfolio_reports",
            ),
            node(
                router_feature_report,
                inputs={"retrieval_inputs": "retrieval_inputs", "retrieval_feature_cost": "retrieval_feature_cost",
                        "paper_encoders": "paper_encoders", "paper_block_cost": "paper_block_cost"},
                outputs="router_feature_report",
                name="router_feature_report",
            ),
            node(
                evaluate_routers,
                inputs={"portfolio_reports": "portfolio_reports", "routing_rows": "routing_rows",
                        "scored_pool": "scored_pool", "router_selection": "router_selection",
                        "router_feature_report": "router_feature_report", "bundle": "params:router_training.bundle"},
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
