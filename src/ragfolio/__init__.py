"""ragfolio: retriever portfolios for adaptive retrieval-augmented QA."""

__version__ = "0.1.0"
