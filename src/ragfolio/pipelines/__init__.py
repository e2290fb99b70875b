"""Kedro pipelines: thin nodes that validate parameters and call :mod:`ragfolio.core`."""
