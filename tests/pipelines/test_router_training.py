"""router_training with the routers that see the retrieval, router_evaluation of them on test, then
packaging of what it chose, on the tiny fixtures (BM25-only pool, no models)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset
from kedro_datasets.pickle import PickleDataset
from param_datasets import param_datasets
from routed_portfolio import SWITCHING_NET
from synthesis_stage import synthesis_datasets

from ragfolio.core.cache import ArrayCache
from ragfolio.core.routing.registry import servable_names
from ragfolio.core.scoring.utility_index import datasets_of, split_questions
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedSystem
from ragfolio.datasets.bundle_folders import BundlesDataset, ServedBundleDataset
from ragfolio.pipeline_registry import register_pipelines

pytestmark = pytest.mark.slow

GRID = {
    "bm25": [{"k1": [0.6, 1.5], "b": [0.3, 0.9]}],
    "graph": [{"seeds": "bm25", "n_seeds": [1, 2], "rank": "ppr"}],
    "two_hop": [{"first": "bm25", "append": ["title", "text"], "second": "bm25"}],
}


# The learned router: a small net trained briefly (the tiny fixture), or one that learns the
# switching questions' two halves from their hashed words (the ``switching_dir`` fixture).
TINY_NET = {"hidden": 8, "embedding_dim": 4, "max_epochs": 3, "patience": 2}


def _params(tiny_dir, router: str, dev_fraction: float, net: dict = TINY_NET) -> dict:
    return {
        "data_prep": {"raw_dir": str(tiny_dir), "test_dir": None, "test_fraction": 0.3, "dev_fraction": dev_fraction,
                      "seed": 0},
        "candidate_scoring": {"num_docs": 2, "prefilter_depth": 10, "score": "support_recall",
                              "graph_max_degree": 20, "encoders": {}, "grid": GRID},
        "candidate_grids": {},  # presets by name; the grid above is written out
        "portfolio_selection": {"k": 3, "k_max": 4, "random_draws": 5, "seed": 0},
        "router_training": {
            "text_features": {"n_features": 64}, "encoders": [],
            "router": net,
            "retrieval_routing": {"agreement_depth": 5, "post_retrieval": {"min_questions": 2, "min_z": 0.0},
                                  "cascade": {"members_run": 2, "pre": {"min_questions": 2, "min_z": 0.0},
                                              "post": {"min_questions": 2, "min_z": 0.0}}},
            "bundle": {"router": router, "default_l": 2},
            "seed": 0,
        },
        "paper_router": None,  # the lab's study of the paper's router: off
        "packaging": {},
    }


def _catalog(tmp_path, tiny_dir, router: str, dev_fraction: float = 0.0, net: dict = TINY_NET) -> DataCatalog:
    params = _params(tiny_dir, router, dev_fraction, net)
    datasets = {**param_datasets(params)}
    datasets["retrieval_cache"] = MemoryDataset(ArrayCache(tmp_path / "cache"), copy_mode="assign")
    datasets |= synthesis_datasets(tmp_path)  # data_prep -> question_synthesis -> candidate_scoring
    for name in ("router_metrics", "router_timings"):
        datasets[name] = JSONDataset(filepath=str(tmp_path / f"{name}.json"))
    datasets["router_headline"] = JSONDataset(filepath=str(tmp_path / "router_headline.json"))
    for name in ("router_comparison", "dev_router_comparison", "dev_same_budget", "routers", "retrieval_routers", "questions",
                 "utility_index"):  # kept past their last use, for the checks below
        datasets[name] = PickleDataset(filepath=str(tmp_path / f"{name}.pkl"))
    datasets["bundles"] = BundlesDataset(str(tmp_path / "bundles"))  # packaging's, as the catalog stores them
    datasets["bundle"] = ServedBundleDataset(str(tmp_path / "served.json"), str(tmp_path / "bundles"))
    return DataCatalog(datasets)


@pytest.fixture
def catalog(tmp_path, tiny_dir) -> DataCatalog:
    return _catalog(tmp_path, tiny_dir, "post_retrieval")


def _run(catalog: DataCatalog) -> None:
    pipelines = register_pipelines()
    names = ("data_prep", "question_synthesis", "candidate_scoring", "portfolio_selection", "router_training", "router_evaluation",
             "packaging")
    SequentialRunner().run(sum((pipelines[name] for name in names[1:]), pipelines[names[0]]), catalog)


def test_router_training_reports_the_retrieval_routers(catalog: DataCatalog) -> None:
    _run(catalog)
    metrics = catalog.load("router_metrics")
    k = metrics["k"]
    features = metrics["retrieval_features"]
    assert "bm25.top1" in features["names"]["first_stage"] and "overlap.bm25" in features["names"]["members"]
    assert "cost" not in features  # measured times: in router_timings
    cost = catalog.load("router_timings")["retrieval_features"]["cost"]
    assert cost["n_queries"] == 14 and cost["first_stage_ms_per_query"] > 0
    for key, entry in metrics["datasets"].items():
        oracle = entry["oracle"]["best_of_l"][0]
        for mode in servable_names(learned=False):
            curve = entry[mode]["best_of_l"]
            assert len(curve) == k and curve == sorted(curve) and curve[-1] == pytest.approx(oracle), (key, mode)
            assert f"{mode}_l1" in entry["summary"] and "gap_closed_l1" in entry[mode]
            assert set(entry[mode]["minus_single_best"]) == set(entry[mode]["minus_greedy_prefix"]) == {"l1", "l2"}
            assert isinstance(entry["selection"][mode]["fallback"], bool)
            if entry["selection"][mode]["fallback"]:  # a router that fell back takes the default member first
                assert entry["headroom"]["routers"][mode]["switched"] == 0
        cascade = entry["cascade_curve"]  # test best-of-1 by members run; the cascade runs 2 (as set)
        assert cascade["members_run"] == list(range(1, k + 1)) and cascade["chosen"] == 2
        assert cascade["best_of_1"][1] == pytest.approx(entry["cascade"]["best_of_l"][0])
        assert cascade["best_of_1"][0] == pytest.approx(entry["top_average"]["best_of_l"][0])  # m = 1: the default
        room = entry["headroom"]
        assert room["n"] == entry["n_test"] and set(room["routers"]) >= set(servable_names())
        assert room["routers"]["top_average"]["switched"] == 0 and room["routers"]["top_average"]["captured"] in (0, None)
        assert "learned" in entry["selection"]
    assert np.isfinite(metrics["datasets"]["all"]["post_retrieval"]["best_of_l"]).all()

    bundle = catalog.load("bundle")  # router_training.bundle.router: post_retrieval is what is served
    assert bundle.router.name == "post_retrieval" and bundle.routing.retrieval_features.agreement_depth == 5
    system = RoutedSystem.from_bundle(bundle)
    routed = system.retrieve(RetrievalRequest("which river is the longest", 2, system.depth))
    assert len(routed.members) == 2 and all(run.ok for run in routed.results.runs)
    system.close()


@pytest.mark.parametrize("dev_fraction", [0.0, 0.3], ids=["validation", "dev"])
def test_auto_serves_the_winner_and_serves_what_the_report_measured(tmp_path, switching_dir, dev_fraction) -> None:
    """``bundle.router: auto`` serves the router with the largest gain over the default member on the
    dev questions (on validation inside train without a dev split), the bundle and the report name it,
    and every trained router's served picks (batched and one query at a time, through the bundle's
    runner) equal the report's picks on the same test questions. On the switching questions (BM25
    wins one half, a graph walk the other), so no router falls back and each one's picks vary."""
    catalog = _catalog(tmp_path, switching_dir, "auto", dev_fraction, SWITCHING_NET)
    _run(catalog)
    metrics, bundle = catalog.load("router_metrics"), catalog.load("bundle")
    gains = {}
    if dev_fraction:  # recomputed here from the dev routings: best-of-1 minus the default member's
        dev = catalog.load("dev_router_comparison")["all"]
        assert len(dev.utilities) == metrics["datasets"]["all"]["dev"]["n_dev"] > 0
        U, default = dev.utilities, int(dev.picks["top_average"][0, 0])
        for name in servable_names():  # cheapest first: the order ties go in
            picks = dev.picks[name][:, 0]
            gains[name] = float(U[np.arange(len(U)), picks].mean() - U[:, default].mean())
    else:  # recomputed here from the validation values
        selection = metrics["datasets"]["all"]["selection"]
        for name in servable_names():  # cheapest first: the order ties go in
            entry = selection[name]
            gains[name] = 0.0 if entry["fallback"] else entry["val_best_of_1"] - entry["val_default"]
    winner = max(gains, key=lambda name: (gains[name] - 1e-9 * list(gains).index(name)))
    served = metrics["served"]
    assert served["router"] == winner and served["requested"] == "auto" and served["portfolio"] == "all"
    assert served["on"] == ("dev" if dev_fraction else "validation")
    on = "dev" if dev_fraction else "val"
    assert {n: v[f"{on}_gain"] for n, v in served["validation"].items()} == pytest.approx(gains, abs=1e-6)
    assert bundle.router.name == winner and bundle.selection["served_router"]["router"] == winner
    budget = served["same_budget"]
    assert set(budget["union_minus_single"]) == {"l1", "l2"} and len(budget["routed_union_recall"]) == metrics["k"]
    # do no harm: routing only at the l's whose dev same-budget test passed Holm's step-down over every
    # servable router x l (none without dev), by default at the smallest of them
    family = catalog.load("dev_same_budget").get("all", {})
    evidence = family.get(winner, {})
    assert set(evidence) == ({f"l{l}" for l in range(1, metrics["k"] + 1)} if dev_fraction else set())
    assert all(test["m"] == len(family) * metrics["k"] for tests in family.values() for test in tests.values())
    expected = [l for l in range(1, metrics["k"] + 1) if (evidence.get(f"l{l}") or {}).get("passed")]
    assert served["routed_ls"] == expected and bundle.routed_ls == tuple(expected)
    assert served["evidence"].get(winner, {}) == evidence
    assert served["default_l"] == bundle.default_l == (expected[0] if expected else 2)
    # the served figures are what is served: the router where it routes, the single best member elsewhere
    measured = metrics["datasets"]["all"]
    assert served["test_best_of_l"] == [v if l in expected else measured["single_best_member"]
                                        for l, v in enumerate(measured[winner]["best_of_l"], 1)]
    assert served["test_served_recall"] == [budget["routed_union_recall" if l in expected else "single_best_recall"][l - 1]
                                            for l in range(1, metrics["k"] + 1)]
    if not expected:  # the small run: routing is off, and every place that shows what is served says so
        assert served["routing"] == "off" and "routing off" in served["reason"]
        assert catalog.load("router_headline")["served"]["routing"] == "off"
        system = RoutedSystem.from_bundle(bundle)
        single = system.members[bundle.single_best].name
        for l in (1, 2):  # noqa: E741
            unrouted = system.retrieve(RetrievalRequest("which river is the longest", l, system.depth))
            assert not unrouted.routed and [run.name for run in unrouted.results.runs] == [single]
            assert len(unrouted.results.runs[0].doc_ids) == l * metrics["num_docs"]
        system.close()

    comparison = catalog.load("router_comparison")["all"]
    questions, index = catalog.load("questions"), catalog.load("utility_index")
    texts = [q.question for d in datasets_of(index, "all") for q in split_questions(questions, index, d, "test")]
    k = metrics["k"]
    by_kind = catalog.load("retrieval_routers")
    trained = {"learned": catalog.load("routers")["all"], "pre_retrieval": by_kind["pre_retrieval"]["all"],
               "post_retrieval": by_kind["post_retrieval"]["all"], "cascade": by_kind["cascade"]["all"]}
    selection = metrics["datasets"]["all"]["selection"]
    for name, router in trained.items():
        assert not selection[name]["fallback"], (name, selection[name])
        assert len(set(comparison.picks[name][:, 0].tolist())) > 1, name  # it switches members by question
        system = RoutedSystem.from_bundle(dataclasses.replace(bundle, router=router, routed_ls=None))
        batched = [r.members for r in system.retrieve_batch([RetrievalRequest(t, k, system.depth) for t in texts])]
        alone = [system.retrieve(RetrievalRequest(text, k, system.depth)).members for text in texts]
        assert batched == alone == comparison.picks[name].tolist(), name
        system.close()


def test_the_paper_router_on_the_gemma_block_and_its_universal_router(tmp_path, tiny_dir) -> None:
    """``paper_router`` with the embedded LLM's block and ``universal``: the paper router in every
    portfolio's entry, the universal one in each dataset's (over the ``all`` members, trained on
    every dataset's train questions), the blocks in the report and their cost in the timings."""
    catalog = _catalog(tmp_path, tiny_dir, "learned")
    catalog.save("params:paper_router", {"encoders": ["gemma"], "universal": True, "width": 16, "max_epochs": 3,
                                         "timing_queries": 8})
    _run(catalog)
    metrics, timings = catalog.load("router_metrics"), catalog.load("router_timings")
    assert metrics["paper_router"]["encoders"] == ["gemma"] and metrics["paper_router"]["blocks"]["gemma"]["dim"] == 640
    assert "cost" not in metrics["paper_router"]  # measured times: in router_timings
    cost = timings["paper_router"]["cost"]["gemma"]
    assert cost["ms_per_query"] > 0 and cost["n_queries"] == 8
    k, shared = metrics["k"], metrics["datasets"]["all"]["members"]
    index = catalog.load("utility_index")
    for key, entry in metrics["datasets"].items():
        assert len(entry["paper"]["best_of_l"]) == k and "l1" in entry["paper"]["minus_single_best"]
        if key == "all":
            assert "paper_universal" not in entry  # there the universal router is the paper router
            continue
        universal = entry["paper_universal"]
        assert universal["members"] == shared and len(universal["best_of_l"]) == k
        assert set(universal["minus_single_best"]) == {"l1", "l2"}
        assert entry["n_test"] == int((np.asarray(index.datasets[key].split) == "test").sum())


def test_list_judgements_from_a_trained_cross_encoder_are_trained_on_and_served(tmp_path, tiny_dir, monkeypatch) -> None:
    """With a cross-encoder trained (``train: always``, no family in the grid) and list judgements on, the member features gain
    ``judge.*``, a train question's judged by the fold model that did not train on it (cross-fitting), the
    bundle carries the full cross-encoder (and no fold model) for them, and the post-retrieval router served
    from the saved bundle picks what the report measured."""
    from cross_encoders import TINY, Recording, one_thread

    from ragfolio.core.bundle import CROSS_ENCODER, load_bundle, resolve_bundle, save_bundle
    from ragfolio.core.retrieval.reranking.cross_encoder_folder import read_manifest
    from ragfolio.core.retrieval.reranking.cross_fitting import CrossFittedCrossEncoder
    from ragfolio.core.retrieval.running import cross_scores
    from ragfolio.datasets.cross_encoders import CrossEncoderDataset, CrossEncoderFoldsDataset

    catalog = _catalog(tmp_path, tiny_dir, "post_retrieval")
    params = catalog.load("params:candidate_scoring")
    settings = {**TINY.to_dict(), "epochs": 1, "max_train_questions": 6, "dev_depth": 5}
    catalog["params:candidate_scoring"] = MemoryDataset({**params, "cross_encoder": {"train": "always", "folds": 2,
                                                                                      "settings": settings}})
    catalog["cross_encoder"] = CrossEncoderDataset(str(tmp_path / "ce"))
    catalog["cross_encoder_folds"] = CrossEncoderFoldsDataset(str(tmp_path / "folds"))
    recording = Recording(cross_scores.load_cross_encoder)
    monkeypatch.setattr(cross_scores, "load_cross_encoder", recording)
    routing = catalog.load("params:router_training")
    catalog.save("params:router_training", {**routing, "retrieval_routing": {**routing["retrieval_routing"],
                                                                             "list_judgements": True}})
    catalog["retrieval_inputs"] = PickleDataset(filepath=str(tmp_path / "retrieval_inputs.pkl"))
    with one_thread():
        _run(catalog)
    names = catalog.load("retrieval_inputs").names["members"]
    assert names[-3:] == ["judge.max", "judge.mean", "judge.coverage"]
    members = next(iter(catalog.load("retrieval_inputs").members["all"].values()))
    judged = members[..., -3:]
    assert judged.std() > 0 and (0 <= judged).all() and (judged <= 1).all()
    models = CrossFittedCrossEncoder.read(str(tmp_path / "ce"), str(tmp_path / "folds"))
    assert models.fitting is not None and len(models.folds) == 2
    for folder in models.folds:  # each train question's judge.* features: by a fold model that did not train on it
        trained_on = {q["question"] for q in catalog.load("questions")
                      if q["id"] in read_manifest(folder)["training"]["train_question_ids"]}
        assert recording.scored[folder] and not recording.scored[folder] & trained_on
    assert not recording.scored[models.full] & set(models.fitting.texts.values())
    bundle = catalog.load("bundle")  # the served bundle as packaging saved it: with its copy of the full model
    assert bundle.routing.retrieval_features.judge and not any(m.family == "cross_encoder" for m in bundle.members)
    copy = resolve_bundle(tmp_path / "served.json") / CROSS_ENCODER
    assert bundle.scoring.cross_encoder == str(copy) and bundle.scoring.cross_encoder_folds is None
    assert read_manifest(str(copy)) == read_manifest(models.full)
    manifest = save_bundle(bundle, tmp_path / "bundle")
    assert (tmp_path / "bundle" / CROSS_ENCODER).is_dir() and "cross_encoder_folds" not in manifest["scoring"]
    assert not any("fold_" in name for name in manifest["files"])
    comparison = catalog.load("router_comparison")["all"]
    questions, index = catalog.load("questions"), catalog.load("utility_index")
    texts = [q.question for d in datasets_of(index, "all") for q in split_questions(questions, index, d, "test")]
    router = catalog.load("retrieval_routers")["post_retrieval"]["all"]
    loaded = load_bundle(tmp_path / "bundle")
    with one_thread():
        system = RoutedSystem.from_bundle(dataclasses.replace(loaded, router=router, routed_ls=None))
        picks = [r.members for r in system.retrieve_batch([RetrievalRequest(t, loaded.k, system.depth) for t in texts])]
        system.close()
    assert picks == comparison.picks["post_retrieval"].tolist()
