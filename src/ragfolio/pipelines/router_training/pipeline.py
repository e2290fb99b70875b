from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.core.timings import split_timings
from ragfolio.pipelines.router_training.nodes import (
    build_query_features,
    compare_on_test,
    evaluate_routers,
    headline_routers,
    plot_router_curves,
    router_settings,
    train_routers,
)
from ragfolio.pipelines.router_training.paper_nodes import build_paper_blocks, compare_paper_routers
from ragfolio.pipelines.router_training.retrieval_nodes import (
    build_retrieval_features,
    cascade_curves,
    compare_on_dev,
    compare_retrieval_routers,
    judge_on_dev,
    routing_selection,
    train_retrieval_routers,
)

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
                router_settings,
                inputs={"pool_settings": "pool_settings", "params": "params:router_training"},
                outputs="router_features",
                name="router_settings",
            ),
            node(
                build_query_features,
                inputs={
                    "questions": "questions", "corpora": "corpora", "utility_index": "utility_index",
                    "pool_settings": "pool_settings", "router_features": "router_features", "cache": "retrieval_cache",
                },
                outputs="router_inputs",
                name="build_query_features",
            ),
            node(  # the paper router's own query encodings (mpnet, gemma) and each block's cost; {} when off
                build_paper_blocks,
                inputs={
                    "questions": "questions", "utility_index": "utility_index", "pool_settings": "pool_settings",
                    "router_features": "router_features", "params": "params:router_training", "cache": "retrieval_cache",
                },
                outputs=["paper_query_blocks", "paper_encoders"],
                name="build_paper_blocks",
            ),
            node(
                build_retrieval_features,
                inputs={
                    "questions": "questions", "corpora": "corpora", "candidates": "candidates",
                    "utility_index": "utility_index", "portfolios": "portfolios", "pool_settings": "pool_settings",
                    "params": "params:router_training", "cache": "retrieval_cache",
                },
                outputs="retrieval_inputs",
                name="build_retrieval_features",
            ),
            node(
                train_routers, inputs={**ROWS, "params": "params:router_training"}, outputs="routers",
                name="train_routers",
            ),
            node(
                train_retrieval_routers,
                inputs={**ROWS, "retrieval_inputs": "retrieval_inputs", "params": "params:router_training"},
                outputs="retrieval_routers",
                name="train_retrieval_routers",
            ),
            node(
                compare_on_dev,
                inputs={
                    **ROWS, "retrieval_inputs": "retrieval_inputs", "routers": "routers",
                    "retrieval_routers": "retrieval_routers",
                },
                outputs="dev_router_comparison",
                name="compare_on_dev",
            ),
            node(  # the do-no-harm rule's evidence: routed unions against the single best, same passages
                judge_on_dev,
                inputs={
                    "dev_comparison": "dev_router_comparison", "questions": "questions", "corpora": "corpora",
                    "candidates": "candidates", "utility_index": "utility_index", "portfolios": "portfolios",
                    "pool_settings": "pool_settings", "cache": "retrieval_cache",
                },
                outputs="dev_same_budget",
                name="judge_on_dev",
            ),
            node(
                routing_selection,
                inputs={
                    "routers": "routers", "retrieval_routers": "retrieval_routers",
                    "dev_comparison": "dev_router_comparison", "params": "params:router_training",
                    "dev_same_budget": "dev_same_budget",
                },
                outputs="router_selection",
                name="routing_selection",
            ),
            node(
                compare_on_test,
                inputs={**ROWS, "routers": "routers", "params": "params:router_training"},
                outputs="query_router_comparison",
                name="compare_on_test",
            ),
            node(
                compare_paper_routers,
                inputs={
                    **ROWS, "router_inputs": "router_inputs", "paper_query_blocks": "paper_query_blocks",
                    "query_router_comparison": "query_router_comparison", "params": "params:router_training",
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
