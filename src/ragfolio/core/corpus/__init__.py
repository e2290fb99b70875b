"""The living corpus: passage metadata, filters, live updates and their log."""
