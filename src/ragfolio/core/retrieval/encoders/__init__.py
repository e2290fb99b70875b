"""Encoders: text to vectors, from packages that carry their weights."""
