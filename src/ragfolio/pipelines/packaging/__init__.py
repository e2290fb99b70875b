"""``packaging``: what is served, assembled once: the portfolio bundle of the router router training chose."""

from ragfolio.pipelines.packaging.pipeline import create_pipeline

__all__ = ["create_pipeline"]
