"""The laboratory: studies, ablations and baselines beside the product (:mod:`ragfolio`).

What ``bentoml serve`` and a team's ``kedro run`` need is the product; what measures it against the
paper and other systems is here. The lab imports the product; the product imports nothing from the
lab (tests/lab/test_product_apart.py): the lab joins in through entry points (pyproject.toml),
``ragfolio.pipelines`` for its stages and ``ragfolio.routers`` for the paper's router.

* :mod:`ragfolio_lab.routers`: the paper's router recipe, its query encoders and the universal router.
* :mod:`ragfolio_lab.judging`: headroom and the feature ablation.
* :mod:`ragfolio_lab.answering`: the end-to-end comparison of answering systems (resumable, summarised)
  and the Vendi-RAG baselines.
* :mod:`ragfolio_lab.pipelines`: ``router_evaluation`` (routers judged on test) and
  ``answering_evaluation`` (systems answered and scored on test).
"""
