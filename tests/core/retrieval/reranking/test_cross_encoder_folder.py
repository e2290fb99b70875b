"""A saved cross-encoder loads back with the same scores; a tampered or empty folder is refused, named."""

from __future__ import annotations

import json

import numpy as np
import pytest
from cross_encoders import one_thread, save_untrained

from ragfolio.core.retrieval.reranking.cross_encoder_folder import (
    MANIFEST,
    WEIGHTS,
    CrossEncoderFolder,
    TrainedCrossEncoder,
    cross_encoder_digest,
    load_cross_encoder,
    weights_digest,
)

QUERIES = ["Where was Alice born?", "Where was Bob born?"]
PASSAGES = ["Alice. Alice was born in Paris.", "Carol. Carol was born in Oslo."]


def test_save_and_load_give_the_same_scores(tmp_path) -> None:
    with one_thread():
        save_untrained(tmp_path / "ce")
        scorer = load_cross_encoder(tmp_path / "ce", device="cpu")
        scores = scorer.score(QUERIES, PASSAGES)
        TrainedCrossEncoder(scorer, {"k": 1}).save(tmp_path / "again")
        again = load_cross_encoder(tmp_path / "again", device="cpu").score(QUERIES, PASSAGES)
    np.testing.assert_array_equal(scores, again)
    manifest = json.loads((tmp_path / "again" / MANIFEST).read_text())
    assert manifest["trained"] and manifest["training"] == {"k": 1} and WEIGHTS in manifest["files"]
    assert cross_encoder_digest(tmp_path / "again") == weights_digest(manifest["files"])
    assert "2_Dense/model.safetensors" in manifest["files"]  # the mean-pooled head's own weights
    assert CrossEncoderFolder.read(tmp_path / "again").model_path == str(tmp_path / "again")
    rows = scorer.score_rows(QUERIES, PASSAGES, np.array([[1, -1], [0, 1]]))
    assert rows[0, 1] == -np.inf and rows[0, 0] == pytest.approx(scorer.score(QUERIES[:1], PASSAGES[1:])[0], rel=1e-5)
    np.testing.assert_allclose(rows[1], scorer.score([QUERIES[1]] * 2, PASSAGES), rtol=1e-5)


def test_a_changed_file_or_a_folder_without_a_model_is_refused(tmp_path) -> None:
    with one_thread():
        save_untrained(tmp_path / "ce")
    (tmp_path / "ce" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="config.json is missing or does not match"):
        load_cross_encoder(tmp_path / "ce")
    TrainedCrossEncoder(None, {"reason": "the grid lacks the family"}).save(tmp_path / "none")
    assert CrossEncoderFolder.read(tmp_path / "none").model_path is None
    with pytest.raises(FileNotFoundError, match="holds no trained cross-encoder: the grid lacks the family"):
        load_cross_encoder(tmp_path / "none")
    with pytest.raises(FileNotFoundError, match="no trained cross-encoder at"):
        cross_encoder_digest(tmp_path / "absent")


def test_the_digest_changes_with_the_head_alone(tmp_path) -> None:
    import torch

    with one_thread():
        scorer = load_cross_encoder(save_untrained(tmp_path / "ce"), device="cpu")
        with torch.no_grad():
            scorer.model[-1].linear.bias.add_(1.0)  # the Dense head; the encoder is untouched
        TrainedCrossEncoder(scorer, {}).save(tmp_path / "moved")
    before, after = (json.loads((tmp_path / name / MANIFEST).read_text()) for name in ("ce", "moved"))
    assert before["files"][WEIGHTS] == after["files"][WEIGHTS]
    assert cross_encoder_digest(tmp_path / "ce") != cross_encoder_digest(tmp_path / "moved")
