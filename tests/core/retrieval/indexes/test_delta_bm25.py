"""An added passage's BM25 score is the score a rebuilt index would give it, up to the average
length the base keeps (bm25s's own formulas, the base's vocabulary and document frequencies)."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.indexes.bm25_index import BM25Retriever, tokenize
from ragfolio.core.retrieval.indexes.delta_bm25 import DeltaBM25, average_length
from ragfolio.core.retrieval.running.pool_runner import passage_texts

ADDED = ["Zorblax Quintavelle. Zorblax Quintavelle founded the Quintavelle glass works in Venice.",
         "Venice glass. The glass works of Venice made mirrors for the French court."]


@pytest.mark.parametrize("method", ["lucene", "robertson", "atire"])
def test_added_passages_score_as_a_rebuilt_index_scores_them(tiny_dir, method) -> None:
    corpus = build_corpus(load_folder(tiny_dir))
    base_texts = passage_texts(corpus.titles, corpus.texts)
    base = BM25Retriever(method=method).index(corpus.texts, tokens=tokenize(base_texts))
    delta = DeltaBM25(base.statistics(), base.n_docs, average_length(tokenize(base_texts)), ADDED, "english")
    rebuilt_texts = base_texts + ADDED
    rebuilt = BM25Retriever(method=method).index(rebuilt_texts, tokens=tokenize(rebuilt_texts))
    queries = ["Who founded the Quintavelle glass works?", "glass mirrors Venice", "a question about nothing here"]
    got = delta.scores(queries)
    want = rebuilt.retrieve(queries, len(rebuilt_texts))
    for q in range(len(queries)):
        for j in range(len(ADDED)):
            row = base.n_docs + j
            hit = np.flatnonzero(want.doc_ids[q] == row)
            expected = float(want.scores[q][hit[0]]) if hit.size else 0.0
            # the only difference: the rebuilt index's average length counts the added passages
            assert got[q, j] == pytest.approx(expected, rel=0.05, abs=1e-6), (method, queries[q], j)
    assert got[2].tolist() == [0.0, 0.0]  # shares no word: not matched
    assert got[0, 0] > got[0, 1] > 0  # a word only the added passage has (Quintavelle) counts
