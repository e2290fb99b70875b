"""Select portfolios on the train rows of each utility matrix (and of all datasets together)."""

from ragfolio.pipelines.portfolio_selection.pipeline import create_pipeline

__all__ = ["create_pipeline"]
