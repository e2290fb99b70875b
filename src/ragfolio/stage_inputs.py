"""A stage run before the stages that write its inputs: one line that names the stage to run first.

``kedro run --pipelines=router_training`` on a fresh clone would fail in its first node, deep in a
dataset's load, with a long traceback. :func:`missing_inputs` finds, before any node runs, the inputs
of the pipeline that none of its nodes writes, that a registered stage writes, and that are not
stored yet; :class:`MissingInputsError` names each one, where it would be, the stage that writes it,
and the command to run first. Inputs that no stage writes (the raw data, the caches a stage fills as
it goes) and in-memory datasets are left to the stages themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset, MemoryDataset
from kedro.pipeline import Pipeline


@dataclass(frozen=True)
class MissingInput:
    """An input of a run that is not stored yet.

    Attributes:
        name: Its catalog entry, e.g. ``"utility_matrices"``.
        location: The file or folder it is read from, relative to the project where it lies inside it.
        stages: The registered stages that write it, in registration order.
    """

    name: str
    location: str
    stages: tuple[str, ...]


class MissingInputsError(Exception):
    """A run needs inputs that earlier stages write and that do not exist yet; the message says what to run."""

    def __init__(self, run: str, missing: Sequence[MissingInput], same_params: bool = False) -> None:
        self.run = run
        self.missing = tuple(missing)
        needs = "; ".join(f"{m.name} ({m.location}), which {' or '.join(m.stages)} writes" for m in self.missing)
        first = list(dict.fromkeys(m.stages[0] for m in self.missing))
        params = " with the same --params" if same_params else ""
        super().__init__(
            f"{run} needs {needs}: run `kedro run --pipelines={','.join(first)}`{params} first "
            f"(or `kedro run --pipelines=portfolio`{params}, every stage in order)"
        )


def _location(dataset: AbstractDataset, project: Path) -> str:
    """Where ``dataset`` lies (its ``filepath`` or ``path``), relative to ``project`` when inside it."""
    described = dataset._describe()  # noqa: SLF001 - the one place a Kedro dataset states its path
    where = Path(str(described.get("filepath") or described.get("path") or dataset))
    return str(where.relative_to(project)) if where.is_relative_to(project) else str(where)


def missing_inputs(pipeline: Pipeline, catalog: Any, stages: Mapping[str, Pipeline], project: Path) -> list[MissingInput]:
    """The inputs of ``pipeline`` that a stage of ``stages`` writes and that ``catalog`` does not hold yet.

    Args:
        pipeline: The pipeline about to run (a stage, several, or part of one).
        catalog: The run's Kedro ``DataCatalog``.
        stages: The registered stages by name (not the unions of them, such as ``portfolio``).
        project: The project's root, to show paths relative to it.

    Returns:
        One :class:`MissingInput` per such input, in name order; empty when the run can start.
    """
    missing = []
    for name in sorted(pipeline.inputs()):
        writers = tuple(stage for stage, stage_pipeline in stages.items() if name in stage_pipeline.all_outputs())
        dataset = catalog.get(name) if writers else None
        if dataset is None or isinstance(dataset, MemoryDataset) or dataset.exists():
            continue
        missing.append(MissingInput(name, _location(dataset, project), writers))
    return missing
