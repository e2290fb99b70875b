"""Every pipeline on an in-memory catalog over the tiny real-data fixtures (Kedro's smoke-test style)."""

from __future__ import annotations

import numpy as np
import pytest
from kedro.io import DataCatalog, MemoryDataset
from kedro.runner import SequentialRunner
from kedro_datasets.json import JSONDataset
from kedro_datasets.pandas import JSONDataset as PandasJSONDataset
from param_datasets import param_datasets
from synthesis_stage import synthesis_datasets

from ragfolio.core.bundle import save_bundle
from ragfolio.core.cache import ArrayCache
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedSystem
from ragfolio.core.timings import TIMING_KEYS
from ragfolio.datasets.array_folders import ArrayFolderDataset
from ragfolio.datasets.bundle_folders import BundlesDataset, ServedBundleDataset
from ragfolio.datasets.record_files import RecordDataset
from ragfolio.datasets.router_folders import RouterFolderDataset, RoutersByKindDataset
from ragfolio.pipeline_registry import register_pipelines
from ragfolio_lab.answering.store import AnswerStore
from ragfolio_lab.answering.systems import SYSTEMS

ANSWERED = tuple(s for s in SYSTEMS if s != "vendi_rag_authors")  # vendirag's own loop is opt-in
SERVICE = ("service_l1", "service_l2", "service_l3")  # the served bundle's served_l<l>, what `bentoml serve` answers

pytestmark = pytest.mark.slow

JSON_OUTPUTS = (
    "questions", "candidates", "portfolio_metrics",
    "router_metrics", "answer_metrics", "router_timings", "answer_timings",
)
RECORDS = {  # as conf/base/catalog.yml stores them
    "corpora": "ragfolio.core.data.corpora.Corpora",
    "pool_settings": "ragfolio.core.scoring.runners.PoolSettings",
    "portfolios": "ragfolio.core.selection.portfolios.Portfolios",
    "utility_index": "ragfolio.core.scoring.utility_index.UtilityIndex",
    "router_features": "ragfolio.core.routing.features.router_features.RouterFeatures",
    "router_selection": "ragfolio.core.routing.judging.choice.RouterSelection",
}


@pytest.fixture
def catalog(tmp_path, tiny_dir, encoders, small_grid, handoffs) -> DataCatalog:
    params = {
        "data_prep": {"raw_dir": str(tiny_dir), "test_dir": None, "test_fraction": 0.3, "seed": 0},
        "candidate_scoring": {
            "num_docs": 4, "prefilter_depth": 10, "score": "support_recall", "graph_max_degree": 20,
            "encoders": encoders, "grid": small_grid,
        },
        "candidate_grids": {},  # the grid above is written out, no preset
        "portfolio_selection": {"k": 3, "k_max": 4, "random_draws": 5, "seed": 0},
        "evaluation": {"report_k": [1, 3]},
        "paper_router": None,  # the lab's study of the paper's router: off
        "router_training": {
            "text_features": {"n_features": 256}, "encoders": ["minilm"],
            "router": {"hidden": 16, "embedding_dim": 8, "max_epochs": 20, "patience": 5}, "seed": 0,
        },
        "packaging": {"reader": {  # the small reader, in every bundle: what answering evaluation answers with
            "llm": {"kind": "llama_cpp", "llama_cpp": {"model": "gemma-3-270m", "n_ctx": 2048}}},
            "answer_check": {"questions": 4}},  # do no harm on answers, on 4 dev questions
        "answering_evaluation": {
            "max_questions_per_dataset": 1, "systems": "all",
            "vendi_rag": {"max_iterations": 2}, "seed": 0,
        },
    }
    datasets = {**param_datasets(params)}
    datasets["retrieval_cache"] = MemoryDataset(ArrayCache(tmp_path / "cache"), copy_mode="assign")
    datasets |= synthesis_datasets(tmp_path)  # data_prep -> question_synthesis -> candidate_scoring
    # Intermediate outputs persist to files (Kedro releases in-memory ones once consumed).
    for name in JSON_OUTPUTS:
        datasets[name] = JSONDataset(filepath=str(tmp_path / f"{name}.json"))
    for name, record in RECORDS.items():
        datasets[name] = RecordDataset(str(tmp_path / f"{name}.json"), record)
    datasets["utility_matrices"] = ArrayFolderDataset(str(tmp_path / "utility"))
    datasets["routers"] = RouterFolderDataset(str(tmp_path / "routers"))
    datasets["retrieval_routers"] = RoutersByKindDataset(str(tmp_path / "retrieval_routers"))
    datasets["bundles"] = BundlesDataset(str(tmp_path / "bundles"))
    datasets["bundle"] = ServedBundleDataset(str(tmp_path / "served.json"), str(tmp_path / "bundles"))
    datasets |= handoffs(tmp_path)  # router_training -> router_evaluation
    datasets["answer_store"] = MemoryDataset(AnswerStore(tmp_path / "answer_store.jsonl"), copy_mode="assign")
    for name in ("answers", "answer_latencies"):
        datasets[name] = PandasJSONDataset(
            filepath=str(tmp_path / f"{name}.jsonl"), load_args={"lines": True}, save_args={"orient": "records", "lines": True}
        )
    return DataCatalog(datasets)


def test_every_pipeline_in_order(catalog: DataCatalog, tmp_path) -> None:
    pipelines = register_pipelines()
    assert pipelines["portfolio"].all_outputs() >= pipelines["evaluation"].all_outputs()
    for name in ("data_prep", "question_synthesis", "candidate_scoring", "portfolio_selection"):
        SequentialRunner().run(pipelines[name], catalog)
    figures = SequentialRunner().run(pipelines["evaluation"], catalog)
    index = catalog.load("utility_index")
    assert set(index.datasets) == {"hotpotqa", "musique"}
    n_candidates = len(index.candidates)
    assert n_candidates == 12
    for dataset, rows in index.datasets.items():
        U = catalog.load("utility_matrices")[dataset]
        assert U.shape == (len(rows.ids), n_candidates) and U.dtype == np.float32
        assert ((U >= 0) & (U <= 1)).all()
        assert set(rows.split) == {"train", "test"}

    metrics = catalog.load("portfolio_metrics")
    assert metrics["n_candidates"] == n_candidates and metrics["num_docs"] == 4
    for key in ("hotpotqa", "musique", "all"):
        entry = metrics["datasets"][key]
        assert len(entry["portfolio"]) == 3
        for split in ("train", "test"):
            report = entry[split]
            assert len(report["greedy_at_k"]) == 4
            assert report["greedy_at_k"] == sorted(report["greedy_at_k"])  # best-of-k never falls
            assert report["oracle_all"] >= max(report["greedy_at_k"]) - 1e-6
        # On its own train rows greedy is at least as good as top-by-average at every k.
        train = entry["train"]
        assert all(g >= t - 1e-6 for g, t in zip(train["greedy_at_k"], train["top_by_average_at_k"], strict=True))
        assert 0 < entry["certificate"]["ratio"] <= 1
    assert metrics["datasets"]["all"]["n_test"] == sum(metrics["datasets"][d]["n_test"] for d in ("hotpotqa", "musique"))
    assert set(figures) == {"best_of_k_plot", "winners_heatmap", "best_of_k_data", "sample_complexity_plot",
                            "portfolio_headline"}
    headline = figures["portfolio_headline"].load()  # what `dvc metrics show` prints
    assert headline["k"] == 3 and headline["greedy"]["all"] == metrics["datasets"]["all"]["test"]["greedy_at_k"][2]
    assert headline["oracle"] == metrics["datasets"]["all"]["test"]["oracle_all"]
    table = catalog.load("best_of_k_data")  # the all portfolio's test curves, for `dvc plots`
    assert list(table["greedy"]) == metrics["datasets"]["all"]["test"]["greedy_at_k"] and list(table["k"]) == [1, 2, 3, 4]
    assert metrics["datasets"]["all"]["test"]["at_portfolio_k"]["greedy"] == metrics["datasets"]["all"]["test"]["greedy_at_k"][2]

    # router_training: one router per portfolio; router_evaluation: every ablation, the same-budget check
    SequentialRunner().run(pipelines["router_training"], catalog)
    assert pipelines["router_training"].all_outputs().isdisjoint({"router_metrics", "bundle"})  # test is not read
    SequentialRunner().run(pipelines["router_evaluation"], catalog)
    routers = catalog.load("routers")
    assert set(routers) == {"hotpotqa", "musique", "all"}
    router_metrics = catalog.load("router_metrics")
    for key, entry in router_metrics["datasets"].items():
        assert routers[key].members_ == metrics["datasets"][key]["portfolio"]
        for name in ("learned", "random", "top_average", "greedy_prefix", "logistic", "oracle"):
            curve = entry[name]["best_of_l"]
            assert len(curve) == 3 and curve == sorted(curve)
            assert curve[-1] == pytest.approx(entry["oracle"]["best_of_l"][0])  # l = k: every member
        assert len(entry["same_budget"]["routed_union_recall"]) == 3
        assert len(entry["same_budget"]["single_best_recall"]) == 3
        assert "gap_closed_l1" in entry

    # packaging: what router training chose, served
    SequentialRunner().run(pipelines["packaging"], catalog)
    bundle = catalog.load("bundle")  # the served portfolio: all, over the union corpus every number was measured on
    assert bundle.name == "all" and bundle.members[0].name == metrics["datasets"]["all"]["portfolio"][0]
    corpora = catalog.load("corpora")
    assert corpora.datasets == {"hotpotqa": "union", "musique": "union"} and list(corpora.corpora) == ["union"]
    assert len(bundle.corpus) == len(corpora.corpora["union"])
    assert all(len(emb) == len(bundle.corpus) for emb in bundle.embeddings.values())
    fingerprint = bundle.corpus.fingerprint  # the served corpus is the measured one
    assert metrics["corpus"] == router_metrics["corpus"] == bundle.selection["corpus"] == {
        "mode": "union", "fingerprint": fingerprint, "n_passages": len(bundle.corpus)}
    assert save_bundle(bundle, tmp_path / "bundle")["corpus"]["fingerprint"] == fingerprint
    settings = catalog.load("pool_settings")  # what candidate scoring ran with, as the bundle describes it
    assert settings.num_docs == router_metrics["num_docs"] == 4 and settings.score == "support_recall"
    assert bundle.scoring == settings
    assert bundle.routing == catalog.load("router_features")

    # answering_evaluation: every system answers with the embedded LLM, each with cold query caches
    SequentialRunner().run(pipelines["answering_evaluation"], catalog)
    answers = catalog.load("answers")
    assert set(answers["system"]) == {*ANSWERED, *SERVICE}  # k = 3: routed l = 1, 2, 3 in every mode
    assert len(answers) == 2 * (len(ANSWERED) + len(SERVICE))  # one question per dataset
    assert (answers["tokens"] > 0).all()
    assert set(answers.columns) >= {"id", "dataset", "system", "prediction", "answers", "em", "f1",
                                    "tokens", "run_position", "foreign_query_hits", "settings", "parse_failures",
                                    "n_calls"}
    assert not set(answers.columns) & TIMING_KEYS  # timings are in their own rows, by (id, dataset, system)
    latencies = catalog.load("answer_latencies")
    assert list(latencies.columns) == ["id", "dataset", "system", "latency_ms", "retrieval_ms"]
    assert list(latencies["id"]) == list(answers["id"]) and (latencies["latency_ms"] > 0).all()
    answer_metrics, answer_timings = catalog.load("answer_metrics"), catalog.load("answer_timings")
    assert "retrieval_orders" not in answer_metrics and set(answer_timings["retrieval_orders"]) == {"hotpotqa", "musique"}
    assert answer_metrics["foreign_query_hits"] == 0
    for dataset in ("hotpotqa", "musique", "all"):
        for system in (*ANSWERED, *SERVICE):
            m = answer_metrics["datasets"][dataset][system]
            assert 0 <= m["em"] <= m["f1"] + 1e-9 <= 1 + 1e-9
            t = answer_timings["datasets"][dataset][system]
            assert t["latency_ms_p95"] >= t["latency_ms_mean"] > 0 and m["tokens_mean"] > 0
            assert not set(m) & TIMING_KEYS
            assert (system == "single_best") != ("minus_single_best" in m)
        assert 1 <= answer_metrics["datasets"][dataset]["vendi_rag"]["rounds_mean"] <= 2
    by_system = answers.groupby("system")["tokens"].mean()
    assert by_system["routed_l3"] > by_system["routed_l1"]  # k answers cost more than one
    # what is evaluated is what is served: each dataset's served_l<l> used the members its bundle picks
    bundles = catalog.load("bundles")
    assert list(bundles) == ["all", "hotpotqa", "musique"]  # one per portfolio key, the served one first
    assert [m.name for m in bundles["all"].members] == [m.name for m in bundle.members]
    texts = {q["id"]: q["question"] for q in catalog.load("questions")}
    for row in answers[answers["system"].str.match(r"serv(ed|ice)_l")].itertuples():  # service: the served bundle's
        served = RoutedSystem.from_bundle(bundles[row.dataset if row.system.startswith("served") else bundle.name])
        got = served.retrieve(RetrievalRequest(texts[row.id], int(row.system.rpartition("_l")[2]), served.depth))
        assert [served.members[j].name for j in got.members] == list(row.members)
        served.close()
    # a second run reads every answer from the store: no LLM call, the same predictions
    SequentialRunner().run(pipelines["answering_evaluation"], catalog)
    again = catalog.load("answers")
    first, second = (frame.sort_values(["id", "system"]).reset_index(drop=True) for frame in (answers, again))
    assert list(second["prediction"]) == list(first["prediction"])
    assert list(second["tokens"]) == list(first["tokens"])
    before, after = (frame.sort_values(["id", "system"]).reset_index(drop=True)
                     for frame in (latencies, catalog.load("answer_latencies")))
    assert list(after["latency_ms"]) == list(before["latency_ms"])  # stored, not measured again


def test_per_dataset_corpora_are_reported_per_dataset(catalog: DataCatalog, tiny_dir) -> None:
    """``data_prep.corpus: per_dataset``: each dataset retrieves from its own corpus, and reports say so."""
    catalog.save("params:data_prep", {"raw_dir": str(tiny_dir), "test_fraction": 0.3, "seed": 0, "corpus": "per_dataset"})
    pipelines = register_pipelines()
    for name in ("data_prep", "question_synthesis", "candidate_scoring", "portfolio_selection", "evaluation", "router_training",
                 "router_evaluation", "packaging"):
        SequentialRunner().run(pipelines[name], catalog)
    corpora = catalog.load("corpora")
    assert corpora.datasets == {"hotpotqa": "hotpotqa", "musique": "musique"}
    expected = corpora.describe()
    assert set(expected["fingerprints"]) == {"hotpotqa", "musique"} and "fingerprint" not in expected
    assert catalog.load("portfolio_metrics")["corpus"] == catalog.load("router_metrics")["corpus"] == expected
    bundle = catalog.load("bundle")  # all: both datasets' corpora stacked, each passage once
    assert len(bundle.corpus) == len({passage_id for corpus in corpora.corpora.values() for passage_id in corpus.ids})
    assert all(len(emb) == len(bundle.corpus) for emb in bundle.embeddings.values())
    assert bundle.selection["corpus"] == expected
    bundles = catalog.load("bundles")  # a dataset's bundle serves the corpus that dataset was answered from
    assert all(bundles[d].corpus.fingerprint == corpora.corpora[d].fingerprint for d in ("hotpotqa", "musique"))
