from typing import Any

from kedro.pipeline import Pipeline, node

from ragfolio.pipelines.packaging.nodes import build_bundles, packaging_settings, served_bundle, served_routers
from ragfolio.pipelines.packaging.served_answers import check_served_answers
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
            node(packaging_settings, inputs={"bundle": BUNDLE, "packaging": "params:packaging"},
                 outputs="packaging_settings", name="packaging_settings"),
            node(  # each portfolio with its served router, everything it searches and the reader
                build_bundles,
                inputs={
                    "scored_pool": "scored_pool", "portfolios": "portfolios", "served_routers": "served_routers",
                    "dev_router_comparison": "dev_router_comparison", "router_features": "router_features",
                    "settings": "packaging_settings",
                },
                outputs="built_bundles",
                name="build_bundles",
            ),
            node(  # do no harm on answers: the served bundle's reader on dev questions, before it is saved
                check_served_answers,
                inputs={"bundles": "built_bundles", "questions": "questions", "packaging": "params:packaging",
                        "bundle": BUNDLE},
                outputs=["bundles", "answer_check"],
                name="check_served_answers",
            ),
            # the served bundle: a pointer to bundles/<key> (06_models/served.json), not a copy
            node(served_bundle, inputs={"bundles": "bundles", "bundle": BUNDLE}, outputs="bundle", name="served_bundle"),
        ]
    )
