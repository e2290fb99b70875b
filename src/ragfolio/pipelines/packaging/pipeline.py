from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.packaging.nodes import build_bundle


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            node(  # what router_training chose (router_selection), served with everything it searches
                build_bundle,
                inputs={
                    "corpora": "corpora", "candidates": "candidates", "portfolios": "portfolios",
                    "router_selection": "router_selection", "routers": "routers",
                    "retrieval_routers": "retrieval_routers", "dev_router_comparison": "dev_router_comparison",
                    "router_features": "router_features", "pool_settings": "pool_settings",
                    "cache": "retrieval_cache", "params": "params:router_training",
                },
                outputs="bundle",
                name="build_bundle",
            ),
        ]
    )
