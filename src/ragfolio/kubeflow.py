"""The ``portfolio`` pipeline as a Kubeflow Pipelines (KFP v2) spec: one step per Kedro pipeline.

    python -m ragfolio.kubeflow compile --output portfolio_pipeline.yaml [--image IMAGE] [--data-root PATH]

Each step is a lightweight Python component that runs ``kedro run --pipelines=<name>`` in the
project folder of the image. Steps pass nothing to each other through KFP: they share the data
catalog's storage, whose root is the ``data_root`` runtime parameter of ``conf/base/catalog.yml``
(a volume mounted in every step). A step runs after the steps whose Kedro pipelines produce a
dataset it reads, as found from the registered pipelines' inputs and outputs. The Kedro parameters
listed in ``conf/base/kubeflow.yml`` become pipeline parameters, each passed with ``--params`` to
the steps whose pipelines read it. See docs/cluster_kubeflow.md.

Kept free of ``from __future__ import annotations``: KFP reads the step function's annotations as types.
"""

import argparse
import dataclasses
import inspect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kedro.config import OmegaConfigLoader
from kedro.pipeline import Pipeline

logger = logging.getLogger(__name__)

PIPELINE_NAME = "ragfolio-portfolio"
SCALARS = (str, int, float, bool)


def run_kedro_pipeline(project_dir: str, pipeline: str, data_root: str, params: str, workspace: str) -> None:
    """One step: ``kedro run --pipelines=<pipeline>`` in ``project_dir``, catalog under ``data_root``.

    ``params`` is ``key=value`` pairs joined by commas; a pair with an empty value is dropped, so the
    project's value stays. A relative ``data_root`` lies in the run's KFP ``workspace`` when there is
    one. (KFP copies this function's source into the step: imports stay inside.)
    """
    import logging
    import os
    import subprocess
    import sys

    if workspace and not os.path.isabs(data_root):
        data_root = os.path.join(workspace, data_root)
    pairs = [pair for pair in params.split(",") if pair and not pair.endswith("=")]
    pairs.append(f"data_root={data_root}")
    command = [sys.executable, "-m", "kedro", "run", f"--pipelines={pipeline}", "--params=" + ",".join(pairs)]
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1"}
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # a fresh step process: nothing set up yet
    logging.getLogger("ragfolio.kubeflow").info("[%s] in %s: %s", pipeline, project_dir, " ".join(command))
    subprocess.run(command, cwd=project_dir, env=env, check=True)


@dataclass(frozen=True)
class KubeflowSettings:
    """The ``kubeflow`` block of conf/base/kubeflow.yml, with each exposed parameter's default.

    Attributes:
        image: The image every step runs in (this project installed at ``project_dir``).
        project_dir: The Kedro project's folder in the image.
        data_root: Default storage root of the catalog: a path on a volume every step mounts, or
            relative to the run's workspace when ``workspace_size`` is set.
        parameters: Exposed Kedro parameters (dotted keys) and their defaults from the project.
        workspace_size: Size of a KFP workspace (a volume the backend creates per run and mounts
            in every step, e.g. ``"10Gi"``; KFP >= 2.14); None: no workspace.
    """

    image: str
    project_dir: str
    data_root: str
    parameters: Mapping[str, str | int | float | bool | None]
    workspace_size: str | None = None

    @classmethod
    def from_conf(cls, conf_source: str | Path, **overrides: str | None) -> "KubeflowSettings":
        """Read the settings and parameter defaults from a project's ``conf`` folder (base + local)."""
        loader = OmegaConfigLoader(
            str(conf_source), base_env="base", default_run_env="local",
            config_patterns={"kubeflow": ["kubeflow*", "kubeflow*/**"]},
        )
        block = dict(loader["kubeflow"]["kubeflow"])
        defaults = {key: _leaf(loader["parameters"], key) for key in block.pop("parameters", [])}
        block.update({key: value for key, value in overrides.items() if value is not None})
        known = {"image", "project_dir", "data_root", "workspace_size"}
        if set(block) - known:
            raise ValueError(f"kubeflow settings {sorted(set(block) - known)} are unknown; known: {sorted(known)}")
        return cls(parameters=defaults, **block)


def _leaf(parameters: Mapping[str, Any], dotted: str) -> str | int | float | bool | None:
    value: Any = parameters
    for part in dotted.split("."):
        if not isinstance(value, Mapping) or part not in value:
            raise ValueError(f"kubeflow parameter {dotted!r} is not a project parameter")
        value = value[part]
    if value is not None and not isinstance(value, SCALARS):
        raise ValueError(f"kubeflow parameter {dotted!r} is a {type(value).__name__}; only scalars can be exposed")
    return value


def pipeline_parameter(dotted: str) -> str:
    """The KFP name of a Kedro parameter: ``portfolio_selection.k`` -> ``portfolio_selection__k``."""
    return dotted.replace(".", "__")


def stages(pipelines: Mapping[str, Pipeline]) -> dict[str, Pipeline]:
    """The registered pipelines that are steps (all but the registry's aggregates)."""
    from ragfolio.pipeline_registry import AGGREGATES

    return {name: pipe for name, pipe in pipelines.items() if name not in AGGREGATES}


def stage_dependencies(pipelines: Mapping[str, Pipeline]) -> dict[str, list[str]]:
    """For each step, the steps that produce a dataset it reads, in an order that runs them first.

    Raises:
        ValueError: If the steps' datasets form a cycle, naming the steps left in it.
    """
    steps = stages(pipelines)
    needs = {
        name: [other for other in steps if other != name and pipe.inputs() & steps[other].all_outputs()]
        for name, pipe in steps.items()
    }
    ordered: dict[str, list[str]] = {}
    while len(ordered) < len(needs):
        ready = [name for name in needs if name not in ordered and all(dep in ordered for dep in needs[name])]
        if not ready:
            raise ValueError(f"the pipelines {sorted(set(needs) - set(ordered))} depend on each other in a cycle")
        ordered.update({name: needs[name] for name in ready})
    return ordered


def parameter_groups(pipe: Pipeline) -> set[str]:
    """Top-level parameter keys a pipeline reads (``params:portfolio_selection`` -> ``portfolio_selection``)."""
    return {name.removeprefix("params:").split(".")[0] for name in pipe.inputs() if name.startswith("params:")}


def step_component(name: str, image: str) -> Any:
    """The lightweight component of one step, named after its Kedro pipeline."""
    from kfp import dsl
    from kfp.dsl.python_component import PythonComponent

    generic = dsl.component(run_kedro_pipeline, base_image=image, install_kfp_package=False)
    spec = dataclasses.replace(generic.component_spec, name=name.replace("_", "-"))
    return PythonComponent(component_spec=spec, python_func=run_kedro_pipeline)


def build_pipeline(pipelines: Mapping[str, Pipeline], settings: KubeflowSettings) -> Any:
    """The KFP pipeline (a ``GraphComponent``): call it under ``kfp.local`` or compile it."""
    from kfp import dsl

    order = stage_dependencies(pipelines)
    steps = stages(pipelines)
    components = {name: step_component(name, settings.image) for name in order}
    exposed = dict(settings.parameters)
    signature = [
        inspect.Parameter("project_dir", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=settings.project_dir, annotation=str),
        inspect.Parameter("data_root", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=settings.data_root, annotation=str),
    ]
    for key, default in exposed.items():
        kind = str if default is None else type(default)
        signature.append(inspect.Parameter(
            pipeline_parameter(key), inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default="" if default is None else default, annotation=kind,
        ))
    names = [p.name for p in signature]

    def portfolio(*args: Any) -> None:
        values = dict(zip(names, args, strict=True))
        tasks: dict[str, Any] = {}
        for name, needs in order.items():
            groups = parameter_groups(steps[name])
            params = ",".join(
                f"{key}={values[pipeline_parameter(key)]}" for key in exposed if key.split(".")[0] in groups
            )
            task = components[name](
                project_dir=values["project_dir"], pipeline=name, data_root=values["data_root"], params=params,
                workspace=dsl.WORKSPACE_PATH_PLACEHOLDER if settings.workspace_size else "",
            )
            task.set_display_name(name)
            task.set_caching_options(False)  # the data live on the volume, outside what KFP's cache sees
            for dep in needs:
                task.after(tasks[dep])
            tasks[name] = task

    portfolio.__signature__ = inspect.Signature(signature)  # type: ignore[attr-defined]
    portfolio.__doc__ = "ragfolio: data_prep -> question_synthesis -> candidate_scoring -> portfolio_selection -> evaluation, routers, answers."
    config = None
    if settings.workspace_size:
        config = dsl.PipelineConfig(workspace=dsl.WorkspaceConfig(size=settings.workspace_size))
    return dsl.pipeline(name=PIPELINE_NAME, description=portfolio.__doc__, pipeline_config=config)(portfolio)


def compile_pipeline(
    output: str | Path, *, conf_source: str | Path = "conf", image: str | None = None, data_root: str | None = None,
    workspace_size: str | None = None, pipelines: Mapping[str, Pipeline] | None = None,
) -> Path:
    """Write the KFP pipeline spec (YAML) of the project's registered pipelines to ``output``."""
    from kfp import compiler

    if pipelines is None:
        from ragfolio.pipeline_registry import register_pipelines

        pipelines = register_pipelines()
    settings = KubeflowSettings.from_conf(conf_source, image=image, data_root=data_root, workspace_size=workspace_size)
    output = Path(output)
    compiler.Compiler().compile(build_pipeline(pipelines, settings), package_path=str(output))
    logger.info("wrote %s: %d steps, image %s, data_root %s", output, len(stages(pipelines)), settings.image, settings.data_root)
    return output


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ragfolio.kubeflow", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    compile_cmd = commands.add_parser("compile", help="write the KFP pipeline spec (YAML)")
    compile_cmd.add_argument("--output", type=Path, default=Path("portfolio_pipeline.yaml"),
                             help="where to write the spec (default: portfolio_pipeline.yaml, git-ignored)")
    compile_cmd.add_argument("--conf-source", type=Path, default=Path("conf"), help="the project's conf folder")
    compile_cmd.add_argument("--image", help="image of every step (default: kubeflow.image in conf)")
    compile_cmd.add_argument("--data-root", help="default data_root (default: kubeflow.data_root in conf)")
    compile_cmd.add_argument("--workspace-size", help="give each run a KFP workspace of this size, e.g. 10Gi")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    compile_pipeline(args.output, conf_source=args.conf_source, image=args.image, data_root=args.data_root,
                     workspace_size=args.workspace_size)


if __name__ == "__main__":
    main()
