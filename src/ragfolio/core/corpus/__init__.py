"""The living corpus: passages that carry metadata, are added while the service runs, and are
searched under a filter.

* :mod:`~ragfolio.core.corpus.metadata_values` says which metadata values are allowed, and
  :mod:`~ragfolio.core.corpus.metadata_columns` holds a corpus's metadata column by column;
* :mod:`~ragfolio.core.corpus.filters` is the filter language that queries to ``/retrieve``,
  ``/answer`` and chat may carry (evaluated on one row, on all rows at once, or translated to
  Elasticsearch);
* :mod:`~ragfolio.core.corpus.live_corpus` is the served corpus with the passages added, replaced
  and deleted since the bundle was built, :mod:`~ragfolio.core.corpus.wal` the log every update is
  written ahead to, and :mod:`~ragfolio.core.corpus.carry_over` that log carried onto a rebuilt bundle.

Import from the submodules; this ``__init__`` imports nothing.
"""
