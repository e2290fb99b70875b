"""Kedro hooks of the project, besides MLflow tracking (:mod:`ragfolio.tracking.mlflow_hooks`).

:class:`RunGuardHook` makes a user's mistakes one clear line (:mod:`ragfolio.errors`), stops a
run on other data that has no name of its own before it overwrites the sample's outputs
(:mod:`ragfolio.runs`), and stops a stage whose inputs no stage has written yet before any node
runs, naming the stage to run first (:mod:`ragfolio.stage_inputs`).

:class:`CredentialsHook` hands the ``elasticsearch:`` section of Kedro's credentials
(``conf/local/credentials.yml``, git-ignored) to the core the way the core reads settings: as the
``ELASTICSEARCH_*`` environment variables, exported for this run where they are not set already (so
an exported variable still wins). ``ragfolio.core`` itself reads no Kedro configuration.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping
from typing import Any

from kedro.config import MissingConfigException
from kedro.framework.hooks import hook_impl

logger = logging.getLogger(__name__)


class RunGuardHook:
    """One line for data and parameter errors; no unnamed run on other data over the sample's layers;
    no stage run before the stages that write its inputs."""

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        from ragfolio.errors import install_excepthook
        from ragfolio.runs import check_not_clobbering

        install_excepthook()
        check_not_clobbering(context.params)

    @hook_impl
    def before_pipeline_run(self, run_params: dict[str, Any], pipeline: Any, catalog: Any) -> None:
        from ragfolio.pipeline_registry import stage_pipelines
        from ragfolio.stage_inputs import check_inputs

        check_inputs(pipeline, catalog, stage_pipelines())


def export_credentials(section: Mapping[str, Any], environ: MutableMapping[str, str]) -> list[str]:
    """Set ``ELASTICSEARCH_<KEY>`` in ``environ`` for each key of ``section`` not set there; the names set.

    Raises:
        ValueError: ``section`` has a key that is no Elasticsearch setting (named).
    """
    from ragfolio.core.retrieval.indexes.elasticsearch_settings import ENV_VARS  # only when there are credentials

    unknown = sorted(set(section) - set(ENV_VARS))
    if unknown:
        raise ValueError(
            f"unknown key(s) {unknown} in the elasticsearch section of the credentials; known: {sorted(ENV_VARS)}"
        )
    exported = [ENV_VARS[key] for key, value in section.items() if value is not None and ENV_VARS[key] not in environ]
    for key, value in section.items():
        if ENV_VARS[key] in exported:
            environ[ENV_VARS[key]] = str(value)
    return exported


class CredentialsHook:
    """Exports the ``elasticsearch`` credentials of the run's configuration for ``ragfolio.core``."""

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        try:
            credentials = context.config_loader["credentials"]
        except MissingConfigException:
            return
        section = (credentials or {}).get("elasticsearch")
        if section:
            exported = export_credentials(section, os.environ)
            logger.info("Elasticsearch settings from the credentials: %s", ", ".join(exported) or "none (all set)")
