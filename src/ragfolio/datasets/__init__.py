"""Kedro datasets of this project: thin adapters over :mod:`ragfolio.core` storage, one module each.

``conf/base/catalog.yml`` names each class by its module (``type: ragfolio.datasets.bundle_folders.
BundlesDataset``), and Kedro imports a dataset's module only when a run uses its entry, so a stage
loads, and ``dvc.yaml`` makes it depend on (``scripts/dvc_deps.py``), only the modules of the
datasets it reads or writes. This package therefore imports nothing: each module imports what its
datasets need.

- :mod:`~ragfolio.datasets.record_files`: a frozen record of :mod:`ragfolio.core` as JSON.
- :mod:`~ragfolio.datasets.timing_files`: measured times, ``{}`` when absent.
- :mod:`~ragfolio.datasets.array_folders`: a ``dict[str, ndarray]`` as a folder of ``.npy`` files.
- :mod:`~ragfolio.datasets.array_trees`: a nested mapping (or a record) of arrays as a folder.
- :mod:`~ragfolio.datasets.retrieval_cache`: the content-keyed :class:`~ragfolio.core.cache.ArrayCache`.
- :mod:`~ragfolio.datasets.cross_encoders`: the trained cross-encoder's folder and its fold models.
- :mod:`~ragfolio.datasets.router_folders`: routers by key, and by kind then key.
- :mod:`~ragfolio.datasets.bundle_folders`: the served bundle and the bundles by portfolio key.
- :mod:`~ragfolio.datasets.record_stores`: the store question_synthesis resumes from.
"""
