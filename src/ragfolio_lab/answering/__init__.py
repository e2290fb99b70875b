"""The end-to-end comparison of answering systems: the systems, the resumable store of answers, their scores and
summary, and the Vendi-RAG baselines."""
