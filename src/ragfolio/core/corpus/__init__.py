"""The living corpus: passages that carry metadata, are added while the service runs, and are
searched under a filter. :mod:`~ragfolio.core.corpus.metadata_values` says which metadata values are
allowed, :mod:`~ragfolio.core.corpus.metadata_columns` holds a corpus's metadata column by column, and
:mod:`~ragfolio.core.corpus.filters` is the filter language that queries to ``/retrieve``, ``/answer`` and
chat may carry (evaluated on one row, on all rows at once, or translated to Elasticsearch).

Import from the submodules; this ``__init__`` imports nothing.
"""
