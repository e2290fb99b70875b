"""The project's pipelines: one per stage, and ``portfolio`` = all of them in order.

The product's stages are its own packages under :mod:`ragfolio.pipelines`; other packages add
stages through the ``ragfolio.pipelines`` entry-point group (``name = "module:create_pipeline"``),
which is how the lab's studies (:mod:`ragfolio_lab`: router and answering evaluation) join
``portfolio`` without the product importing them.
"""

from importlib.metadata import entry_points

from kedro.pipeline import Pipeline

from ragfolio.pipelines import (
    candidate_scoring,
    data_prep,
    evaluation,
    packaging,
    portfolio_selection,
    question_synthesis,
    router_training,
)

PLUGIN_GROUP = "ragfolio.pipelines"
AGGREGATES = ("portfolio", "__default__")  # every stage, in order: not stages of their own


def stage_pipelines() -> dict[str, Pipeline]:
    """One pipeline per stage, in the order they run: the product's, then the plugins' (the lab's).

    Raises:
        ValueError: A plugin names a stage of the product.
    """
    stages = {
        "data_prep": data_prep.create_pipeline(),
        "question_synthesis": question_synthesis.create_pipeline(),
        "candidate_scoring": candidate_scoring.create_pipeline(),
        "portfolio_selection": portfolio_selection.create_pipeline(),
        "evaluation": evaluation.create_pipeline(),
        "router_training": router_training.create_pipeline(),
        "packaging": packaging.create_pipeline(),
    }
    for plugin in entry_points(group=PLUGIN_GROUP):
        if plugin.name in stages:
            raise ValueError(f"pipeline {plugin.name!r} of {plugin.value} is a stage of ragfolio already")
        stages[plugin.name] = plugin.load()()
    return stages


def register_pipelines() -> dict[str, Pipeline]:
    stages = stage_pipelines()
    portfolio = sum(stages.values(), Pipeline([]))
    return {**stages, **dict.fromkeys(AGGREGATES, portfolio)}
