from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.packaging.nodes import build_bundles, served_bundle


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            node(  # what router_training chose for each portfolio (router_selection), with everything it searches
                build_bundles,
                inputs={
                    "corpora": "corpora", "candidates": "candidates", "portfolios": "portfolios",
                    "router_selection": "router_selection", "routers": "routers",
                    "retrieval_routers": "retrieval_routers", "dev_router_comparison": "dev_router_comparison",
                    "router_features": "router_features", "pool_settings": "pool_settings",
                    "cache": "retrieval_cache", "params": "params:router_training",
                    "packaging": "params:packaging",
                },
                outputs="bundles",
                name="build_bundles",
            ),
            node(served_bundle, inputs={"bundles": "bundles", "params": "params:router_training"}, outputs="bundle",
                 name="served_bundle"),
        ]
    )
