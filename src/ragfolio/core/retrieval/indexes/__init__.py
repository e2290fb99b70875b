"""Indexes over a corpus and the first stages they rank: BM25, FAISS, Elasticsearch, the passage graph."""
