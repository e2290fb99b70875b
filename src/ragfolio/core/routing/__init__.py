"""Routers: which of a portfolio's k members should serve a query, and how routers are judged.

* :mod:`~ragfolio.core.routing.base`: what every router is (:class:`RouterProtocol`) and reads
  (:class:`RouteInputs`), and the ``router.json`` every saved router folder holds.
* :mod:`~ragfolio.core.routing.registry`: routers by name (``make_router``, ``load_router``,
  ``register_router``).
* :mod:`~ragfolio.core.routing.routers.baseline_routers`, :mod:`~ragfolio.core.routing.routers.logistic`,
  :mod:`~ragfolio.core.routing.routers.neighbours`: the ablations (fixed orders, random, oracle; logistic
  regression; nearest neighbours). The learned router is
  :class:`ragfolio.core.routing.routers.learned.Router`.
* :mod:`~ragfolio.core.routing.features.retrieval_features`, :mod:`~ragfolio.core.routing.routers.retrieval_routers`: features
  of the first-stage rankings and of each member's results, and the pre- and post-retrieval
  routers that read them.
* :mod:`~ragfolio.core.routing.judging.evaluation`, :mod:`~ragfolio.core.routing.judging.budget`: best-of-l of every
  router on test questions, gap closed, and the same-budget retrieval check;
  :mod:`~ragfolio_lab.judging.headroom`: how much of the room above the default member a router takes.

Import from the submodules; this package's ``__init__`` imports nothing, so that
:mod:`ragfolio.core.routing.routers.learned` and the registry can import :mod:`~ragfolio.core.routing.base` without a cycle.
"""
