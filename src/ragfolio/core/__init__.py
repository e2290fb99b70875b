"""Framework-free core of ragfolio.

Nothing under ``ragfolio.core`` imports kedro, mlflow, bentoml or dvc; the Kedro pipelines and the
service only translate in and out of it (a test checks this in a fresh interpreter).
"""
