"""A stage run before the stages that write its inputs stops before any node, naming the stage to run first."""

from __future__ import annotations

import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.pipeline import Pipeline, node
from kedro_datasets.json import JSONDataset

from ragfolio.errors import one_line, user_error
from ragfolio.stage_inputs import MissingInputError, check_inputs


def _identity(*inputs):
    return inputs[0]


STAGES = {
    "prep": Pipeline([node(_identity, "params:prep", "questions", name="prep")]),
    "scoring": Pipeline([node(_identity, "questions", "utilities", name="score")]),
    "report": Pipeline([node(_identity, ["utilities", "params:report"], "report", name="report")]),
}


def test_a_missing_input_is_named_with_the_stage_that_writes_it(tmp_path) -> None:
    catalog = DataCatalog({name: JSONDataset(filepath=str(tmp_path / f"{name}.json")) for name in ("questions", "utilities")})
    with pytest.raises(MissingInputError) as info:
        check_inputs(STAGES["report"], catalog, STAGES)
    line = one_line(info.value)
    assert line == ("this run needs utilities (written by scoring), which is not there yet: run "
                    "`kedro run --pipelines=scoring` first, or `kedro run --pipelines=portfolio` for every stage in order")
    assert user_error(info.value) is info.value  # printed as one line by the CLI, not a traceback
    catalog.save("utilities", [1])
    check_inputs(STAGES["report"], catalog, STAGES)  # there now: the run goes on
    empty = DataCatalog({name: JSONDataset(filepath=str(tmp_path / "new" / f"{name}.json"))
                         for name in ("questions", "utilities")})
    check_inputs(sum(STAGES.values(), Pipeline([])), empty, STAGES)  # every input written by the run itself


def test_every_missing_stage_is_named_in_the_order_they_run(tmp_path) -> None:
    catalog = DataCatalog({name: JSONDataset(filepath=str(tmp_path / f"{name}.json")) for name in ("questions", "utilities")})
    pipeline = Pipeline([node(_identity, ["questions", "utilities"], "both", name="both")])
    with pytest.raises(MissingInputError, match=r"run `kedro run --pipelines=prep` then `kedro run --pipelines=scoring` first"):
        check_inputs(pipeline, catalog, STAGES)


def test_an_input_in_memory_or_written_by_no_stage_is_not_checked() -> None:
    catalog = DataCatalog({"utilities": MemoryDataset()})  # nothing in it yet, but no file to look for
    check_inputs(Pipeline([node(_identity, "cache", "out", name="uses_a_cache")]), catalog, STAGES)


def test_router_evaluation_names_router_training_and_packaging_needs_no_test_report(tmp_path) -> None:
    from ragfolio.pipeline_registry import register_pipelines

    pipelines = register_pipelines()
    stages = {name: pipe for name, pipe in pipelines.items() if name not in ("portfolio", "__default__")}
    handoffs = ("router_inputs", "retrieval_inputs", "dev_router_comparison", "routers", "retrieval_routers",
                "router_selection")  # (the paper router's blocks are router_evaluation's own, the lab's)
    catalog = DataCatalog({name: JSONDataset(filepath=str(tmp_path / f"{name}.json")) for name in handoffs})
    with pytest.raises(MissingInputError) as info:
        check_inputs(pipelines["router_evaluation"], catalog, stages)
    assert info.value.missing == dict.fromkeys(sorted(handoffs), "router_training")
    assert "run `kedro run --pipelines=router_training` first" in one_line(info.value)
    assert not pipelines["packaging"].inputs() & pipelines["router_evaluation"].all_outputs()
