"""The served bundle: a lossless round trip, checksums that catch any change, and a working portfolio."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from ragfolio.core.bundle import (
    SERVED,
    BundleIntegrityError,
    PortfolioBundle,
    load_bundle,
    resolve_bundle,
    save_bundle,
    save_served,
)
from ragfolio.core.data.passages import Corpus
from ragfolio.core.retrieval.pool import encoders_used, make_candidate
from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.features.query_features import TextHasher, query_features
from ragfolio.core.routing.features.router_features import RetrievalFeatureSettings, RouterFeatures
from ragfolio.core.routing.registry import make_router
from ragfolio.core.routing.routers.baseline_routers import TopAverageRouter
from ragfolio.core.routing.routers.learned import Router
from ragfolio.core.scoring.runners import PoolSettings
from ragfolio.core.system.bundle_indexes import with_indexes
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedSystem

PASSAGES = [
    ("Danube", "The Danube is the second-longest river in Europe."),
    ("Rhine", "The Rhine river flows from the Alps to the North Sea."),
    ("Everest", "Mount Everest is the highest mountain above sea level."),
    ("K2", "K2 is the second-highest mountain on Earth."),
    ("Stradivari", "Antonio Stradivari made violins in Cremona."),
    ("Paganini", "Niccolo Paganini was a violin virtuoso."),
]
TEXT_FEATURES = {"n_features": 64, "word_ngrams": [1, 1], "char_ngrams": [3, 3]}


def _bundle() -> PortfolioBundle:
    members = [make_candidate("bm25", {"k1": k1, "b": 0.75}) for k1 in (0.9, 1.5)]
    rng = np.random.default_rng(0)
    questions = [f"which {w} is {rng.choice(['long', 'high', 'famous'])}" for w in rng.choice(["river", "mountain"], 60)]
    U = np.array([[1.0, 0.0] if "river" in q else [0.0, 1.0] for q in questions], dtype=np.float32)
    hasher = TextHasher(n_features=64, word_ngrams=(1, 1), char_ngrams=(3, 3))
    router = Router(hidden=8, embedding_dim=4, max_epochs=5, random_state=0)
    router.fit(RouteInputs(query_features(questions, {}, hasher)), U, [m.name for m in members])
    corpus = Corpus.from_records([{"id": f"p{i}", "title": t, "text": x} for i, (t, x) in enumerate(PASSAGES)])
    return PortfolioBundle(
        name="tiny", corpus=corpus, members=members, router=router,
        scoring=PoolSettings(num_docs=2, prefilter_depth=4, bm25_base={}, graph_max_degree=5, encoders={},
                             score="support_recall"),
        routing=RouterFeatures(TextHasher.from_dict(TEXT_FEATURES), ()),
        embeddings={"fake": rng.normal(size=(len(PASSAGES), 3)).astype(np.float32)},
        default_l=1, selection={"greedy_train_values": [0.5, 1.0]},
    )


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    save_bundle(_bundle(), tmp_path / "bundle")
    return tmp_path / "bundle"


def test_round_trip_keeps_everything_and_records_checksums(saved: Path) -> None:
    original, loaded = _bundle(), load_bundle(saved)
    assert loaded.corpus == original.corpus and [m.name for m in loaded.members] == [m.name for m in original.members]
    assert loaded.default_l == 1 and loaded.selection == original.selection and loaded.k == 2
    np.testing.assert_array_equal(loaded.embeddings["fake"], original.embeddings["fake"])
    manifest = json.loads((saved / "manifest.json").read_text())
    assert len(loaded.checksum) == 64 and loaded.version == loaded.checksum[:12] == manifest["version"]
    assert set(manifest["files"]) == {"corpus.jsonl", "router/router.json", "router/router.safetensors", "embeddings/fake.npy"}
    assert manifest["ragfolio_version"]


def test_same_content_gives_the_same_version(tmp_path: Path) -> None:
    first = save_bundle(_bundle(), tmp_path / "a")
    second = save_bundle(_bundle(), tmp_path / "b")
    assert first["checksum"] == second["checksum"]


def test_loaded_bundle_routes_like_the_saved_router_and_retrieves(saved: Path) -> None:
    system, original = RoutedSystem.from_bundle(load_bundle(saved)), RoutedSystem.from_bundle(_bundle())
    for query in ("which river is long", "which mountain is high"):
        assert system.route(query, 2)[:2] == original.route(query, 2)[:2]
    river = system.retrieve(RetrievalRequest("which river is long", 2, system.depth), members=[0])
    (run,) = river.results.ok_runs
    assert not river.results.degraded and len(run.doc_ids) == 2
    assert {system.runner.titles[d] for d in run.doc_ids} == {"Danube", "Rhine"}


@pytest.mark.parametrize("name", ["corpus.jsonl", "router/router.safetensors", "embeddings/fake.npy"])
def test_a_changed_byte_is_caught_naming_the_file(saved: Path, name: str) -> None:
    path = saved / name
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(BundleIntegrityError, match=name.replace(".", r"\.")):
        load_bundle(saved)


def test_missing_extra_and_edited_manifest_are_caught(saved: Path) -> None:
    (saved / "embeddings" / "extra.npy").write_bytes(b"x")
    with pytest.raises(BundleIntegrityError, match="extra.npy is not part of the bundle"):
        load_bundle(saved)
    (saved / "embeddings" / "extra.npy").unlink()
    (saved / "embeddings" / "fake.npy").unlink()
    with pytest.raises(BundleIntegrityError, match="fake.npy is listed in the manifest but missing"):
        load_bundle(saved)


def test_manifest_names_the_corpus_by_its_fingerprint(saved: Path) -> None:
    manifest = json.loads((saved / "manifest.json").read_text())
    corpus = _bundle().corpus
    assert manifest["corpus"] == {"n_passages": len(PASSAGES), "fingerprint": corpus.fingerprint}
    assert load_bundle(saved).corpus.fingerprint == corpus.fingerprint


def _resign(folder: Path, edit) -> None:  # type: ignore[no-untyped-def]
    """Apply ``edit`` to the manifest, then record every file's sha256 and the checksum afresh."""
    manifest = json.loads((folder / "manifest.json").read_text())
    edit(manifest)
    manifest["files"] = {name: hashlib.sha256((folder / name).read_bytes()).hexdigest() for name in manifest["files"]}
    body = {k: v for k, v in manifest.items() if k not in ("checksum", "version")}
    manifest["checksum"] = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    (folder / "manifest.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("verify", [True, False])
def test_a_bundle_whose_corpus_was_altered_does_not_load(saved: Path, verify: bool) -> None:
    corpus = saved / "corpus.jsonl"
    corpus.write_text(corpus.read_text().replace("second-longest", "longest"))
    _resign(saved, lambda manifest: None)  # checksums that match the altered file: only the fingerprint tells
    with pytest.raises(BundleIntegrityError, match=r"corpus\.jsonl: corpus of 6 passages with fingerprint"):
        load_bundle(saved, verify=verify)


def test_a_bundle_without_a_corpus_fingerprint_does_not_load(saved: Path) -> None:
    _resign(saved, lambda manifest: manifest["corpus"].pop("fingerprint"))
    with pytest.raises(BundleIntegrityError, match="names no corpus fingerprint"):
        load_bundle(saved)


def test_an_edited_manifest_is_caught(saved: Path) -> None:
    manifest = json.loads((saved / "manifest.json").read_text())
    manifest["default_l"] = 2
    (saved / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleIntegrityError, match="manifest.json does not match"):
        load_bundle(saved)


def test_the_bundle_stores_its_routers_kind_and_loads_that_kind(saved: Path, tmp_path: Path) -> None:
    assert json.loads((saved / "manifest.json").read_text())["router"] == "learned"
    original = _bundle()
    inputs = RouteInputs(query_features(["which river", "which mountain"], {}, original.routing.text_features))
    fixed = make_router("top_average").fit(inputs, np.array([[0.2, 1.0], [0.0, 1.0]]), original.router.members_)
    save_bundle(PortfolioBundle(**{**original.__dict__, "router": fixed}), tmp_path / "fixed")
    loaded = load_bundle(tmp_path / "fixed")
    assert isinstance(loaded.router, TopAverageRouter) and loaded.manifest["router"] == "top_average"
    assert RoutedSystem.from_bundle(loaded).route("which river is long", 2)[0] == [1, 0]


def test_a_manifest_without_a_router_kind_holds_the_learned_router(saved: Path) -> None:
    _resign(saved, lambda manifest: manifest.pop("router"))  # as written before routers had names
    assert isinstance(load_bundle(saved).router, Router)


def test_not_a_bundle_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="packaging"):
        load_bundle(tmp_path)


def test_members_must_match_the_router() -> None:
    bundle = _bundle()
    with pytest.raises(ValueError, match="router's members"):
        PortfolioBundle(**{**bundle.__dict__, "members": bundle.members[::-1]})
    with pytest.raises(ValueError, match="default_l=3"):
        PortfolioBundle(**{**bundle.__dict__, "default_l": 3})


def test_encoders_used_reads_encoder_params_and_bases() -> None:
    members = [
        make_candidate("mmr", {"prefilter": "hybrid:e5", "encoder": "minilm", "lambda": 0.5}),
        make_candidate("bm25", {"k1": 1.2, "b": 0.75}),
        make_candidate("two_hop", {"first": "dense:mpnet", "append": "title", "second": "bm25"}),
    ]
    assert encoders_used(members) == ["e5", "minilm", "mpnet"]


def test_a_bundle_serves_a_router_that_sees_the_retrieval(tmp_path: Path) -> None:
    """A post-retrieval router and its featurizer settings survive the bundle; the loaded one routes alike."""
    from dataclasses import replace

    from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer
    from ragfolio.core.routing.routers.retrieval_routers import PostRetrievalRouter

    base = _bundle()
    runner = base.runner()
    questions = ["which river is long", "which mountain is high", "who made violins", "which river is famous"] * 5
    featurizer = RetrievalFeaturizer((), runner.num_docs, 2)
    first, members = featurizer.compute(runner, questions, base.members)
    U = np.array([[1.0, 0.0] if "river" in q else [0.0, 1.0] for q in questions], dtype=np.float32)
    router = PostRetrievalRouter(min_questions=1, min_z=0.0, n_folds=2).fit(
        RouteInputs({"first_stage": first}, {"members": members}), U, [m.name for m in base.members]
    )
    bundle = replace(base, router=router, routing=replace(base.routing, retrieval_features=RetrievalFeatureSettings((), 2)))
    save_bundle(bundle, tmp_path / "post")
    loaded = load_bundle(tmp_path / "post")
    assert loaded.router.name == "post_retrieval" and loaded.routing.retrieval_features.agreement_depth == 2
    served, original = RoutedSystem.from_bundle(loaded), RoutedSystem.from_bundle(bundle)
    for question in questions[:4]:
        assert (served.retrieve(RetrievalRequest(question, 1, served.depth)).members
                == original.retrieve(RetrievalRequest(question, 1, original.depth)).members)
    served.close()
    original.close()


def test_a_bundle_carries_its_corpus_indexes_checksummed_and_serves_from_them(tmp_path: Path) -> None:
    original = _bundle()
    indexed = with_indexes(original)
    assert sorted((i.kind, i.key["k1"]) for i in indexed.indexes) == [("bm25", 0.9), ("bm25", 1.5)]
    manifest = save_bundle(indexed, tmp_path / "indexed")
    assert manifest["format"] == 2
    assert [entry["path"] for entry in manifest["indexes"]] == ["indexes/bm25-0", "indexes/bm25-1"]
    assert "indexes/bm25-0/data.csc.index.npy" in manifest["files"]  # checksummed like every file
    loaded = load_bundle(tmp_path / "indexed")
    assert isinstance(loaded.embeddings["fake"], np.memmap)  # mapped, not read
    system, fresh = RoutedSystem.from_bundle(loaded), RoutedSystem.from_bundle(original)
    for query in ("which river is long", "the highest mountain"):
        got, want = system.retrieve(RetrievalRequest(query, 2, system.depth)), fresh.retrieve(RetrievalRequest(query, 2, fresh.depth))
        assert [r.doc_ids for r in got.results.runs] == [r.doc_ids for r in want.results.runs]
    index = tmp_path / "indexed" / "indexes" / "bm25-1" / "data.csc.index.npy"
    index.write_bytes(index.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(BundleIntegrityError, match=r"bm25-1/data\.csc\.index\.npy does not match"):
        load_bundle(tmp_path / "indexed")


def test_a_format_1_bundle_without_indexes_still_loads_and_builds_them(saved: Path) -> None:
    def as_format_1(manifest: dict) -> None:
        manifest["format"] = 1
        manifest.pop("indexes")

    _resign(saved, as_format_1)
    loaded = load_bundle(saved)
    assert loaded.indexes == [] and loaded.manifest["format"] == 1
    system = RoutedSystem.from_bundle(loaded)
    assert system.retrieve(RetrievalRequest("which river is long", 1, system.depth)).results.ok_runs


@pytest.mark.slow
def test_a_bundle_carries_the_cross_encoder_its_members_score_with(tmp_path: Path) -> None:
    from dataclasses import replace

    from cross_encoders import one_thread, save_untrained

    base = _bundle()
    members = [base.members[0], make_candidate("cross_encoder", {"prefilter": "bm25", "depth": 3})]
    router = Router(hidden=8, embedding_dim=4, max_epochs=2, random_state=0)
    questions = ["which river is long", "which mountain is high"] * 4
    hasher = TextHasher(n_features=64, word_ngrams=(1, 1), char_ngrams=(3, 3))
    router.fit(RouteInputs(query_features(questions, {}, hasher)), np.eye(2, dtype=np.float32)[[0, 1] * 4],
               [m.name for m in members])
    with one_thread():
        model = save_untrained(tmp_path / "trained")
        scoring = replace(base.scoring, cross_encoder=str(model), cross_encoder_folds=str(tmp_path / "folds"))
        manifest = save_bundle(replace(base, members=members, router=router, scoring=scoring), tmp_path / "ce")
        assert manifest["scoring"]["cross_encoder"] == "cross_encoder"
        assert "cross_encoder_folds" not in manifest["scoring"]  # the full model only: fold models score train rows
        assert "cross_encoder/model.safetensors" in manifest["files"]  # checksummed like every file
        loaded = load_bundle(tmp_path / "ce")
        assert loaded.scoring.cross_encoder == str(tmp_path / "ce" / "cross_encoder")
        assert loaded.scoring.cross_encoder_folds is None
        result = loaded.runner().run(members[1], questions[:2])
    assert result.doc_ids.shape == (2, 2)
    # a bundle none of whose members reads it leaves it out
    without = save_bundle(replace(base, scoring=scoring), tmp_path / "plain")
    assert "cross_encoder" not in without["scoring"] and not (tmp_path / "plain" / "cross_encoder").exists()


def test_the_served_bundle_is_a_pointer_that_resolves_to_its_folder(saved: Path, tmp_path: Path) -> None:
    """Packaging writes the served bundle once, among the others, and points at it; a bundle folder
    named directly, the pointer, and the folder holding the pointer all name the same bundle."""
    models = tmp_path / "06_models"
    save_bundle(_bundle(), models / "bundles" / "all")
    save_served(models / SERVED, models / "bundles" / "all", "all")
    assert json.loads((models / SERVED).read_text()) == {"portfolio": "all", "bundle": "bundles/all"}
    for named in (models / "bundles" / "all", models / SERVED, models):
        assert resolve_bundle(named) == models / "bundles" / "all"
    moved = tmp_path / "elsewhere"
    (models).rename(moved)  # the pointer is relative: the pair moves together
    assert load_bundle(resolve_bundle(moved / SERVED)).name == "tiny"
    assert resolve_bundle(saved) == saved and resolve_bundle(tmp_path / "nothing") == tmp_path / "nothing"


def test_a_pointer_to_no_bundle_or_not_a_pointer_says_so(tmp_path: Path) -> None:
    save_served(tmp_path / SERVED, tmp_path / "bundles" / "hotpotqa", "hotpotqa")
    with pytest.raises(FileNotFoundError, match=r"names .*bundles/hotpotqa \(portfolio 'hotpotqa'\), which holds no bundle"):
        resolve_bundle(tmp_path)
    (tmp_path / "other.json").write_text('{"k": 3}')
    with pytest.raises(ValueError, match=r"other.json is not a served-bundle pointer"):
        resolve_bundle(tmp_path / "other.json")


def test_passage_metadata_survives_a_saved_bundle(tmp_path: Path) -> None:
    plain = _bundle()
    metadata = tuple({"topic": "rivers", "tags": ["europe"]} if i < 2 else None for i in range(len(PASSAGES)))
    corpus = Corpus(plain.corpus.ids, plain.corpus.titles, plain.corpus.texts, metadata)
    manifest = save_bundle(dataclasses.replace(plain, corpus=corpus), tmp_path / "bundle")
    lines = [json.loads(line) for line in (tmp_path / "bundle" / "corpus.jsonl").read_text().splitlines()]
    assert lines[0]["metadata"] == {"topic": "rivers", "tags": ["europe"]} and "metadata" not in lines[2]
    loaded = load_bundle(tmp_path / "bundle")
    assert loaded.corpus == corpus and loaded.corpus.metadata == metadata
    assert manifest["corpus"]["fingerprint"] == loaded.corpus.fingerprint != plain.corpus.fingerprint
