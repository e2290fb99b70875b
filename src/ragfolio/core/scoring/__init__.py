"""Stage 3, scoring: the utility matrix ``U`` (queries x candidates) and which question each row is.

* :mod:`~ragfolio.core.scoring.utility`: how well each candidate serves each query.
* :mod:`~ragfolio.core.scoring.distributed`: ``U`` by query blocks, in this process or on Dask.
* :mod:`~ragfolio.core.scoring.utility_index`: each row's question id, split and type, per dataset.

Per-query scores (support recall, exact match, ...) are :mod:`ragfolio.core.metrics`, shared with
answering. Import from the submodules; this ``__init__`` imports nothing.
"""
