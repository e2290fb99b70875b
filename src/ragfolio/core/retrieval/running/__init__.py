"""Running retrievers: a pool over a corpus with shared parts, and a portfolio's members at answer time."""
