"""Training moves supporting pairs above the others, is seeded, and a rerun reads the cache."""

from __future__ import annotations

import numpy as np
import pytest
from cross_encoders import TINY, corpus_of, one_thread, questions

from ragfolio.core.cache import ArrayCache
from ragfolio.core.retrieval.reranking import fine_tuning
from ragfolio.core.retrieval.reranking.fine_tuning import CrossEncoderSettings, cached_fit, fit_cross_encoder
from ragfolio.core.retrieval.reranking.labelled_pairs import labelled_pairs, rerank_cases

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def data():  # noqa: ANN201
    qs = questions(8)
    corpus = corpus_of(qs)
    texts = [f"{t}. {x}" for t, x in zip(corpus.titles, corpus.texts, strict=True)]
    # a first stage that ranks every passage, in corpus order: the negatives are the non-gold ones
    first = np.tile(np.arange(len(corpus)), (len(qs), 1))
    pairs = labelled_pairs(qs, corpus, texts, [first], negatives=3)
    dev = [(rerank_cases(qs[:4], corpus, first[:4, :6]), texts)]
    return pairs, dev


def _gap(scorer, pairs) -> tuple[float, int]:  # noqa: ANN001
    """Mean score of supporting pairs minus the others', and the questions whose supporting passage scores first."""
    scores = scorer.score(pairs.queries, pairs.passages).reshape(-1, 4)  # per question: gold, then 3 negatives
    return float(scores[:, 0].mean() - scores[:, 1:].mean()), int((scores[:, 0] > scores[:, 1:].max(axis=1)).sum())


def test_training_scores_supporting_pairs_above_the_others(data) -> None:
    pairs, dev = data
    with one_thread():
        before, _ = fit_cross_encoder(pairs, dev, CrossEncoderSettings(**{**TINY.to_dict(), "epochs": 1,
                                                                           "learning_rate": 1e-9}))
        after, report = fit_cross_encoder(pairs, dev, TINY)
    assert abs(_gap(before, pairs)[0]) < 0.05  # the new head knows nothing yet
    gap, first = _gap(after, pairs)
    assert gap > 0.1 and first >= 7  # of 8 questions
    assert report["pairs"] == len(pairs) == 32 and report["positives"] == 8 and report["dev_questions"] == 4
    assert 1 <= len(report["dev_mrr_by_epoch"]) <= TINY.epochs
    assert report["epoch_kept"] == 1 + int(np.argmax(report["dev_mrr_by_epoch"]))


def test_training_is_seeded_and_a_rerun_loads_the_cached_weights(data, tmp_path, monkeypatch) -> None:
    pairs, dev = data
    settings = CrossEncoderSettings(**{**TINY.to_dict(), "epochs": 1})
    with one_thread():
        first, report = cached_fit(ArrayCache(tmp_path), pairs, dev, settings)
        again, _ = fit_cross_encoder(pairs, dev, settings)
        np.testing.assert_array_equal(first.score(pairs.queries, pairs.passages),
                                      again.score(pairs.queries, pairs.passages))
        monkeypatch.setattr(fine_tuning, "fit_cross_encoder", lambda *a: pytest.fail("trained again"))
        cached, cached_report = cached_fit(ArrayCache(tmp_path), pairs, dev, settings)
    np.testing.assert_array_equal(cached.score(pairs.queries, pairs.passages), first.score(pairs.queries, pairs.passages))
    assert cached_report == {**report, "from_cache": True}


def test_bad_settings_and_pairs_fail_naming_them(data) -> None:
    with pytest.raises(ValueError, match="epochs=0"):
        CrossEncoderSettings(epochs=0)
    with pytest.raises(ValueError, match="pooling='max'"):
        CrossEncoderSettings(pooling="max")
    pairs, dev = data
    negatives = type(pairs)(pairs.question_ids[1:4], pairs.queries[1:4], pairs.passages[1:4], pairs.labels[1:4])
    with pytest.raises(ValueError, match="without a supporting one"):
        fit_cross_encoder(negatives, dev, TINY)


def test_both_heads_build_with_one_output() -> None:
    from sentence_transformers.base.modules import Dense

    with one_thread():
        mean, cls = (fine_tuning.new_cross_encoder(CrossEncoderSettings(**{**TINY.to_dict(), "pooling": p}))
                     for p in ("mean", "cls"))
    assert mean.num_labels == cls.num_labels == 1
    assert [type(m).__name__ for m in mean] == ["Transformer", "Pooling", "Dense"] and isinstance(mean[-1], Dense)
    assert [type(m).__name__ for m in cls] == ["Transformer"]


def test_the_labels_are_made_on_the_models_device(data, monkeypatch) -> None:
    """The loss compares the model's logits with the labels, so both must sit on the model's device
    (``device: auto`` puts it on CUDA where there is one). Here the model says it sits on the
    ``meta`` device, and a stand-in loss records where the labels were made."""
    import torch
    from sentence_transformers import CrossEncoder
    from sentence_transformers.cross_encoder import losses

    seen: list[torch.device] = []

    class RecordingLoss:
        def __init__(self, model) -> None:  # noqa: ANN001
            self.model = model

        def __call__(self, inputs, labels):  # noqa: ANN001, ANN204
            seen.append(labels.device)
            return sum(p.sum() for p in self.model.parameters()) * 0.0  # a loss that backpropagates

    monkeypatch.setattr(losses, "BinaryCrossEntropyLoss", RecordingLoss)
    monkeypatch.setattr(CrossEncoder, "device", property(lambda self: torch.device("meta")))
    pairs, _ = data
    with one_thread():
        fit_cross_encoder(pairs, [], CrossEncoderSettings(**{**TINY.to_dict(), "epochs": 1}))
    assert seen and all(device.type == "meta" for device in seen), seen
