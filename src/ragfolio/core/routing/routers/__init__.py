"""The routers: the learned one, its ablations, the routers that see the retrieval.

The paper's recipe and the universal router are the lab's: :mod:`ragfolio_lab.routers`.
"""
