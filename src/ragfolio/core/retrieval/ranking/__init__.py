"""Rankings computed from first stages: fusion, diversification, graph expansion, hops, full lists."""
