"""Experiment tracking: every ``kedro run`` logged to MLflow, the bundle registered as a model."""
