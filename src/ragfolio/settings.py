"""Kedro project settings (https://docs.kedro.org/en/stable/kedro_project_setup/settings.html)."""

from kedro.config import OmegaConfigLoader

CONFIG_LOADER_CLASS = OmegaConfigLoader
CONFIG_LOADER_ARGS = {"base_env": "base", "default_run_env": "local"}

from ragfolio.tracking.hooks import MlflowTrackingHook  # noqa: E402

# Every `kedro run` is logged to MLflow (sqlite:///mlflow.db unless MLFLOW_TRACKING_URI says otherwise).
HOOKS = (MlflowTrackingHook(),)
