from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.packaging.nodes import build_bundles, served_bundle, served_routers
from ragfolio.stage_records import scored_pool_node, trained_routers_node

BUNDLE = "params:router_training.bundle"  # the settings router training chose under


def create_pipeline(**kwargs: Any) -> Pipeline:
    return Pipeline(
        [
            scored_pool_node(),
            trained_routers_node(),
            node(  # what router_training chose for each portfolio (router_selection), among what it trained
                served_routers,
                inputs={"portfolios": "portfolios", "router_selection": "router_selection",
                        "trained_routers": "trained_routers", "bundle": BUNDLE},
                outputs="served_routers",
                name="served_routers",
            ),
            node(  # each portfolio with its served router and everything it searches
                build_bundles,
                inputs={
                    "scored_pool": "scored_pool", "portfolios": "portfolios", "served_routers": "served_routers",
                    "dev_router_comparison": "dev_router_comparison", "router_features": "router_features",
                    "bundle": BUNDLE,
                },
                outputs="bundles",
                name="build_bundles",
            ),
            node(served_bundle, inputs={"bundles": "bundles", "bundle": BUNDLE}, outputs="bundle", name="served_bundle"),
        ]
    )
