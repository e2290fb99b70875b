"""A stage run before the stages that write its inputs: one line that names the stages to run first.

``kedro run --pipelines=router_training`` on a fresh clone would fail in its first node, deep in a
dataset's load, with a long traceback. :func:`check_inputs` looks, before any node runs, at the
inputs of the pipeline that none of its nodes writes and that a registered stage writes: if one is
not stored yet it raises :class:`MissingInputError`, naming each such input, the stage that writes it,
and the runs to do first. Inputs that no stage writes (the raw data, the caches a stage fills as it
goes) and in-memory datasets are left to the stages themselves.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kedro.io import MemoryDataset
from kedro.pipeline import Pipeline


class MissingInputError(Exception):
    """A run needs inputs that earlier stages write and that are not there yet.

    Attributes:
        missing: Each missing input's catalog name -> the stage that writes it, in the stages' order.
    """

    def __init__(self, missing: Mapping[str, str], stage_order: list[str]) -> None:
        self.missing = dict(missing)
        needs = ", ".join(f"{name} (written by {stage})" for name, stage in self.missing.items())
        verb = "is" if len(self.missing) == 1 else "are"
        stages = sorted(set(self.missing.values()), key=stage_order.index)
        runs = " then ".join(f"`kedro run --pipelines={stage}`" for stage in stages)
        super().__init__(
            f"this run needs {needs}, which {verb} not there yet: run {runs} first, "
            "or `kedro run --pipelines=portfolio` for every stage in order"
        )


def check_inputs(pipeline: Pipeline, catalog: Any, stages: Mapping[str, Pipeline]) -> None:
    """Stop a run whose inputs, written by another stage, are not stored yet.

    Args:
        pipeline: The pipeline about to run (a stage, several, or part of one).
        catalog: The run's Kedro ``DataCatalog``.
        stages: The registered stages by name, in the order they run (not their unions, such as ``portfolio``).

    Raises:
        MissingInputError: An input of ``pipeline`` that a stage of ``stages`` writes does not exist.
    """
    order = list(stages)
    missing: dict[str, str] = {}
    for stage, stage_pipeline in stages.items():
        for name in sorted(pipeline.inputs() & stage_pipeline.all_outputs()):
            dataset = catalog.get(name)
            if name in missing or dataset is None or isinstance(dataset, MemoryDataset) or dataset.exists():
                continue
            missing[name] = stage
    if missing:
        raise MissingInputError(missing, order)
