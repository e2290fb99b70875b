"""Tests for ragfolio.core.data.corpora: which corpus each dataset retrieves from, and its JSON form."""

from __future__ import annotations

import json

import pytest

from ragfolio.core.data.corpora import Corpora
from ragfolio.core.data.passages import Corpus

HOTPOT = Corpus(ids=("p1", "p2"), titles=("A", "B"), texts=("a", "b"))
MUSIQUE = Corpus(ids=("p3",), titles=("C",), texts=("c",))
UNION = Corpus(ids=("p1", "p2", "p3"), titles=("A", "B", "C"), texts=("a", "b", "c"))


def test_union_stores_one_corpus_for_every_dataset() -> None:
    corpora = Corpora.union(UNION, ["hotpotqa", "musique"])
    assert corpora.corpus_for("hotpotqa") is corpora.corpus_for("musique") is UNION
    assert corpora.names_for(["hotpotqa", "musique"]) == ["union"]
    data = json.loads(json.dumps(corpora.to_dict()))
    assert data["datasets"] == {"hotpotqa": "union", "musique": "union"} and list(data["corpora"]) == ["union"]
    again = Corpora.from_dict(data)
    assert again == corpora and again.corpus_for("musique") == UNION
    assert again.describe() == {"mode": "union", "fingerprint": UNION.fingerprint, "n_passages": 3}


def test_per_dataset_keeps_one_corpus_a_dataset_labelled_as_such() -> None:
    corpora = Corpora.per_dataset({"hotpotqa": HOTPOT, "musique": MUSIQUE})
    assert corpora.corpus_for("musique") == MUSIQUE
    assert corpora.names_for(["musique", "hotpotqa", "musique"]) == ["musique", "hotpotqa"]
    assert Corpora.from_dict(json.loads(json.dumps(corpora.to_dict()))) == corpora
    assert corpora.describe() == {
        "mode": "per_dataset",
        "fingerprints": {"hotpotqa": HOTPOT.fingerprint, "musique": MUSIQUE.fingerprint},
        "n_passages": {"hotpotqa": 2, "musique": 1},
    }


def test_unknown_dataset_and_bad_forms_are_named() -> None:
    with pytest.raises(KeyError, match="'triviaqa' has no corpus"):
        Corpora.union(UNION, ["hotpotqa"]).corpus_for("triviaqa")
    with pytest.raises(ValueError, match="rerun the data_prep pipeline"):
        Corpora.from_dict({"hotpotqa": HOTPOT.to_records()})  # the older {dataset: records} file
    with pytest.raises(ValueError, match="'musique': 'nowhere'"):
        Corpora("per_dataset", {"hotpotqa": HOTPOT}, {"hotpotqa": "hotpotqa", "musique": "nowhere"})
    with pytest.raises(ValueError, match="mode='both'"):
        Corpora("both", {}, {})  # type: ignore[arg-type]


def test_metadata_survives_the_json_form_and_names_another_corpus() -> None:
    tagged = Corpus(UNION.ids, UNION.titles, UNION.texts, (None, {"year": 2021, "tags": ["a"]}, None))
    data = json.loads(json.dumps(Corpora.union(tagged, ["hotpotqa"]).to_dict()))
    assert data["corpora"]["union"][1]["metadata"] == {"year": 2021, "tags": ["a"]}
    assert "metadata" not in data["corpora"]["union"][0]
    again = Corpora.from_dict(data).corpus_for("hotpotqa")
    assert again == tagged and again.metadata[1] == {"year": 2021, "tags": ["a"]}
    assert again.fingerprint == tagged.fingerprint != UNION.fingerprint
