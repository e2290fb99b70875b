"""MLflow "models from code" entry point: the pyfunc model is this file plus the bundle, no pickle."""

import mlflow

from ragfolio.tracking.model import RagfolioModel

mlflow.models.set_model(RagfolioModel())
