"""How routers are judged and chosen: best-of-l on held-out questions, the same-budget check and do no harm, the served router's choice.

Headroom and the feature ablation are the lab's studies: :mod:`ragfolio_lab.judging`.
"""
