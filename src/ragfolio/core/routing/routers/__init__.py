"""The routers: the learned one, its ablations, the paper's recipe, the routers that see the retrieval, the universal one."""
