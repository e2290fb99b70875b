from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.router_training.nodes import build_bundle, evaluate_routers, plot_router_curves, train_routers

SHARED = {
    "questions": "questions",
    "corpora": "corpora",
    "utility_matrices": "utility_matrices",
    "utility_index": "utility_index",
    "portfolios": "portfolios",
    "cache": "retrieval_cache",
    "scoring_params": "params:candidate_scoring",
    "params": "params:router_training",
}


def create_pipeline(**kwargs) -> Pipeline:  # type: ignore[no-untyped-def]
    return Pipeline(
        [
            node(train_routers, inputs=SHARED, outputs="routers", name="train_routers"),
            node(
                evaluate_routers,
                inputs={**SHARED, "candidates": "candidates", "routers": "routers"},
                outputs="router_metrics",
                name="evaluate_routers",
            ),
            node(plot_router_curves, inputs={"metrics": "router_metrics"}, outputs="router_plot", name="plot_router_curves"),
            node(
                build_bundle,
                inputs={
                    "corpora": "corpora", "candidates": "candidates", "portfolios": "portfolios", "routers": "routers",
                    "router_metrics": "router_metrics", "cache": "retrieval_cache",
                    "scoring_params": "params:candidate_scoring", "params": "params:router_training",
                },
                outputs="bundle",
                name="build_bundle",
            ),
        ]
    )
