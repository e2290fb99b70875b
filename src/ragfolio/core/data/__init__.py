"""Stage 1, data: the questions and passages of a run, read, converted and checked.

* :mod:`~ragfolio.core.data.records`: questions, passages and the retrieval corpus (the JSONL format).
* :mod:`~ragfolio.core.data.loading`: reading folders of those files; the train/test split.
* :mod:`~ragfolio.core.data.converters`: the benchmarks' native files into ragfolio questions.
* :mod:`~ragfolio.core.data.corpora`: the corpora of a run and the one each dataset retrieves from.

Import from the submodules; this ``__init__`` imports nothing.
"""
