"""Kedro project settings (https://docs.kedro.org/en/stable/kedro_project_setup/settings.html)."""

from kedro.config import OmegaConfigLoader

from ragfolio.runs import run_root

CONFIG_LOADER_CLASS = OmegaConfigLoader
# Parameters merge "soft": a conf/local file that sets one key of a section (say
# answering_evaluation.max_questions_per_dataset) keeps the base's other keys of that section. Kedro's
# default, "destructive", would replace the whole section, and the pipeline would silently run on the
# settings' code defaults for everything the override left out.
# ${run_root:NAME} in catalog.yml: the folder of a named run's outputs (data/ for the sample's).
CONFIG_LOADER_ARGS = {
    "base_env": "base", "default_run_env": "local", "merge_strategy": {"parameters": "soft"},
    "custom_resolvers": {"run_root": run_root},
}

from ragfolio.hooks import CredentialsHook, RunGuardHook  # noqa: E402
from ragfolio.tracking.mlflow_hooks import MlflowTrackingHook  # noqa: E402

# A data or parameter error is one line, a run on other data needs a name (ragfolio.runs) before it
# writes anything, and a stage whose inputs are missing names the stage to run first; every `kedro run`
# is logged to MLflow (sqlite:///mlflow.db unless MLFLOW_TRACKING_URI says otherwise); the credentials'
# elasticsearch: section becomes the run's ELASTICSEARCH_* variables. Kedro calls hooks last-registered
# first: the guard is last, so a refused run starts no MLflow run.
HOOKS = (CredentialsHook(), MlflowTrackingHook(), RunGuardHook())
