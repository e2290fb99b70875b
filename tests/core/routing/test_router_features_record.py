"""The router features record: what router training fixed, read the same by answering, bundles and the service."""

from __future__ import annotations

import pytest

from ragfolio.core.routing.features.query_features import TextHasher
from ragfolio.core.routing.features.router_features import (
    SCHEMA_VERSION,
    RetrievalFeatureSettings,
    RouterFeatures,
)


def test_the_record_round_trips_and_reads_a_bundle_written_before_retrieval_routers() -> None:
    features = RouterFeatures(TextHasher(n_features=64), ("minilm",), RetrievalFeatureSettings(("minilm",), 5))
    data = features.to_dict()
    assert data["text_features"] == {"n_features": 64, "word_ngrams": [1, 2], "char_ngrams": [3, 5]}
    assert RouterFeatures.from_dict(data) == features
    old = {"text_features": {"n_features": 64}, "encoders": []}  # an early bundle's manifest "routing"
    assert RouterFeatures.from_dict(old) == RouterFeatures(TextHasher(n_features=64), ())
    featurizer = features.retrieval_features.featurizer(num_docs=4) if features.retrieval_features else None
    assert featurizer is not None and (featurizer.encoders, featurizer.num_docs, featurizer.agreement_depth) == (
        ("minilm",), 4, 5)


def test_list_judgements_are_recorded_only_when_on() -> None:
    plain, judging = RetrievalFeatureSettings(("e5",), 10), RetrievalFeatureSettings(("e5",), 10, judge=True)
    assert "judge" not in plain.to_dict() and judging.to_dict()["judge"] is True
    assert RetrievalFeatureSettings.from_dict(judging.to_dict()) == judging
    assert RetrievalFeatureSettings.from_dict(plain.to_dict()) == plain
    assert judging.featurizer(4).judge and not plain.featurizer(4).judge


def test_a_misspelt_key_or_a_newer_schema_fails_when_loaded() -> None:
    data = RouterFeatures(TextHasher(), ("e5",), RetrievalFeatureSettings(("e5",), 10)).to_dict()
    with pytest.raises(ValueError, match=r"router features: unknown keys \['encoder'\], missing keys \['encoders'\]"):
        RouterFeatures.from_dict({**{k: v for k, v in data.items() if k != "encoders"}, "encoder": ["e5"]})
    with pytest.raises(ValueError, match=r"retrieval_features: unknown keys \['depth'\]"):
        RouterFeatures.from_dict({**data, "retrieval_features": {"encoders": [], "agreement_depth": 5, "depth": 3}})
    with pytest.raises(ValueError, match="schema version 2"):
        RouterFeatures.from_dict({**data, "schema_version": SCHEMA_VERSION + 1})
