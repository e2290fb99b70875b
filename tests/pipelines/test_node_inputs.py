"""Nodes read records, not bags of datasets: no node of a registered pipeline takes more than six inputs."""

from __future__ import annotations

from kedro.pipeline import Pipeline

from ragfolio.pipeline_registry import register_pipelines, stage_pipelines

MAX_INPUTS = 6
RECORDS = ("scored_pool", "routing_rows", "trained_routers")  # made in memory (ragfolio.stage_records)


def too_wide(pipelines: dict[str, Pipeline], limit: int = MAX_INPUTS) -> dict[str, list[str]]:
    """``{node: its inputs}`` for every node of ``pipelines`` with more than ``limit`` inputs."""
    return {node.name: node.inputs for pipe in pipelines.values() for node in pipe.nodes if len(node.inputs) > limit}


def test_no_node_takes_more_than_six_inputs() -> None:
    wide = too_wide(register_pipelines())
    assert not wide, (f"nodes with more than {MAX_INPUTS} inputs: {wide}; group what they read into a record "
                      "(ragfolio.stage_records) or split the node")


def test_the_check_sees_a_wide_node() -> None:
    from kedro.pipeline import node

    wide = node(lambda *args: None, inputs=[f"d{i}" for i in range(7)], outputs="out", name="wide")
    assert too_wide({"p": Pipeline([wide])}) == {"wide": [f"d{i}" for i in range(7)]}


def test_each_stage_makes_the_records_it_reads() -> None:
    """A record is in memory only: a stage run on its own (``dvc repro`` runs each alone) must make it."""
    pipelines = register_pipelines()
    for name, pipe in pipelines.items():
        assert not set(RECORDS) & pipe.inputs(), f"{name} reads {sorted(set(RECORDS) & pipe.inputs())} without making it"
    made = {record: [name for name, pipe in stage_pipelines().items() if record in pipe.all_outputs()]
            for record in RECORDS}
    assert made == {"scored_pool": ["router_training", "packaging", "router_evaluation"],
                    "routing_rows": ["router_evaluation"],
                    "trained_routers": ["router_training", "packaging", "answering_evaluation"]}
    nodes = [node.name for node in pipelines["portfolio"].nodes]
    assert all(nodes.count(record) == 1 for record in RECORDS)  # one copy when the stages are summed
