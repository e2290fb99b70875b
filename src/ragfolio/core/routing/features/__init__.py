"""What routers read: query features and retrieval features (the paper router's own encoders: :mod:`ragfolio_lab.routers`)."""
