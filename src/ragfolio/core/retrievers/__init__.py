"""Retriever families: one module a family, all returning :class:`RetrievalResult`."""

from ragfolio.core.retrievers.base import Prefilter, RetrievalResult

__all__ = ["Prefilter", "RetrievalResult"]
