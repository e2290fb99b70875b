"""Studies of the routers: headroom over the routed members, and the feature ablation."""
