"""What routers read: query features, retrieval features, and the paper router's frozen query encoders."""
