"""The project's pipelines: one per stage, and ``portfolio`` = all of them in order."""

from kedro.pipeline import Pipeline

from ragfolio.pipelines import (
    answering_evaluation,
    candidate_scoring,
    data_prep,
    evaluation,
    packaging,
    portfolio_selection,
    router_evaluation,
    router_training,
)

AGGREGATES = ("portfolio", "__default__")  # every stage, in order: not stages of their own


def stage_pipelines() -> dict[str, Pipeline]:
    """One pipeline per stage, in the order they run."""
    return {
        "data_prep": data_prep.create_pipeline(),
        "candidate_scoring": candidate_scoring.create_pipeline(),
        "portfolio_selection": portfolio_selection.create_pipeline(),
        "evaluation": evaluation.create_pipeline(),
        "router_training": router_training.create_pipeline(),
        "router_evaluation": router_evaluation.create_pipeline(),
        "packaging": packaging.create_pipeline(),
        "answering_evaluation": answering_evaluation.create_pipeline(),
    }


def register_pipelines() -> dict[str, Pipeline]:
    stages = stage_pipelines()
    portfolio = sum(stages.values(), Pipeline([]))
    return {**stages, **dict.fromkeys(AGGREGATES, portfolio)}
