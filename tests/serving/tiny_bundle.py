"""A tiny portfolio bundle over the tiny fixtures, with members that need no encoder model.

Members use BM25 only (BM25, a passage-graph walk from BM25 seeds, a two-hop BM25 retrieval) and
the router reads only the hashed text features, so a service loads it in about a second with no
model files, in this process or in a ``bentoml serve`` subprocess. Its post-retrieval variant
switches members by query (:func:`switching_task`): a test of what it serves sees different picks.

:func:`write_encoder_bundle` adds an encoder, :class:`CountingEncoder` (hashed bags of words, no
model), which the router and two members read and which counts its calls; register it first
(``ENCODER_KINDS["counting"] = CountingEncoder``, in this process only).
"""

from __future__ import annotations

import dataclasses
import zlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import numpy.typing as npt

from ragfolio.core.bundle import PortfolioBundle, save_bundle
from ragfolio.core.data.loading import load_folder
from ragfolio.core.data.passages import build_corpus
from ragfolio.core.retrieval.pool import CandidateSpec, make_candidate
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.features.query_features import TextHasher, query_features
from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer
from ragfolio.core.routing.features.router_features import RetrievalFeatureSettings, RouterFeatures
from ragfolio.core.routing.routers.learned import Router
from ragfolio.core.routing.routers.retrieval_routers import PostRetrievalRouter
from ragfolio.core.scoring.runners import PoolSettings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
MEMBERS = [
    ("bm25", {"k1": 0.9, "b": 0.75}),
    ("graph", {"seeds": "bm25", "n_seeds": 2, "rank": "ppr"}),
    ("two_hop", {"first": "bm25", "append": "title", "second": "bm25"}),
]
SCORING = PoolSettings(num_docs=3, prefilter_depth=12, bm25_base={}, graph_max_degree=20, encoders={}, score="support_recall")


def questions() -> list[str]:
    return [q.question for q in load_folder(FIXTURES)]


def switching_texts() -> list[str]:
    """The tiny questions, then a query made of the title and opening of every third passage (33 texts)."""
    corpus = build_corpus(load_folder(FIXTURES))
    return questions() + [f"{t} {x[:60]}" for t, x in zip(corpus.titles[::3], corpus.texts[::3], strict=True)]


def switching_task(
    runner: PoolRunner, texts: list[str], members: Sequence[CandidateSpec], feature: str
) -> tuple[RouteInputs, npt.NDArray[np.float32]]:
    """The retrieval features of ``texts`` (BM25 first stage, no encoder) and utilities ``(n, k)``
    where the member whose own list scores highest on member feature ``feature`` wins (1, the
    others 0): a task a post-retrieval router learns to switch members on."""
    featurizer = RetrievalFeaturizer((), runner.num_docs, 5)
    first, member_features = featurizer.compute(runner, texts, members)
    wins = member_features[:, :, featurizer.member_names().index(feature)].argmax(axis=1)
    U = np.zeros((len(texts), len(members)), np.float32)
    U[np.arange(len(texts)), wins] = 1.0
    return RouteInputs({"first_stage": first}, {"members": member_features}), U


def write_tiny_bundle(path: Path, router_kind: str = "learned", routed_ls: tuple[int, ...] | None = None) -> dict:
    """Fit a small router on random utilities and save the bundle to ``path``; returns the manifest.

    ``router_kind="post_retrieval"``: the bundle serves a post-retrieval router instead (default
    settings), fitted on :func:`switching_task` over :func:`switching_texts` with ``seed_links`` (a
    feature of each member's list at the bundle's ``num_docs``): it does not fall back, and its
    first pick varies by query. ``routed_ls``: the l's it routes at (the do-no-harm rule's choice;
    None: every l).
    """
    records = load_folder(FIXTURES)
    corpus = build_corpus(records)
    members = [make_candidate(family, params) for family, params in MEMBERS]
    hasher = TextHasher(n_features=64)
    texts = [q.question for q in records]
    U = np.random.default_rng(0).random((len(texts), len(members))).round().astype(np.float32)
    router = Router(hidden=8, embedding_dim=4, max_epochs=3, random_state=0).fit(
        RouteInputs(query_features(texts, {}, hasher)), U, [m.name for m in members]
    )
    bundle = PortfolioBundle(
        name="tiny", corpus=corpus, members=members, router=router, scoring=SCORING,
        routing=RouterFeatures(hasher, ()), embeddings={}, default_l=2, routed_ls=routed_ls,
        selection={"greedy_train_values": [0.5, 0.7, 0.8], "n_train": len(texts)},
    )
    if router_kind == "post_retrieval":
        post = PostRetrievalRouter().fit(*switching_task(bundle.runner(), switching_texts(), members, "seed_links"),
                                         [m.name for m in members])
        if post.fallback_:
            raise RuntimeError(f"the tiny bundle's post-retrieval router fell back: {post.selection()}")
        routing = dataclasses.replace(bundle.routing, retrieval_features=RetrievalFeatureSettings((), 5))
        bundle = dataclasses.replace(bundle, router=post, routing=routing)
    return save_bundle(bundle, path)


class CountingEncoder:
    """Hashed bag-of-words vectors (each text on its own); records the texts of every query call."""

    calls: ClassVar[list[tuple[int, int]]] = []  # (dim, texts) of each encode_queries call, in this process

    def __init__(self, dim: int = 16) -> None:
        self.dim = dim

    def _embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, zlib.crc32(word.encode()) % self.dim] += 1.0
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)

    def encode_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        CountingEncoder.calls.append((self.dim, len(texts)))
        return self._embed(texts)

    def encode_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._embed(texts)


ENCODER_MEMBERS = [
    ("dense", {"encoder": "count"}),
    ("bm25", {"k1": 0.9, "b": 0.75}),
    ("mmr", {"prefilter": "bm25", "encoder": "count", "lambda": 0.7}),
]


def write_encoder_bundle(path: Path) -> dict:
    """A bundle whose router reads two :class:`CountingEncoder` embeddings ("count", dim 16, which
    two members read too, and "count8", dim 8)."""
    from ragfolio.core.retrieval.running.pool_runner import passage_texts

    records = load_folder(FIXTURES)
    corpus = build_corpus(records)
    members = [make_candidate(family, params) for family, params in ENCODER_MEMBERS]
    hasher = TextHasher(n_features=64)
    texts = [q.question for q in records]
    encoders = {"count": CountingEncoder(), "count8": CountingEncoder(dim=8)}
    U = np.random.default_rng(1).random((len(texts), len(members))).round().astype(np.float32)
    features = query_features(texts, {name: e._embed(texts) for name, e in encoders.items()}, hasher)
    router = Router(hidden=8, embedding_dim=4, max_epochs=3, random_state=0).fit(
        RouteInputs(features), U, [m.name for m in members]
    )
    scoring = replace(SCORING, encoders={"count": {"kind": "counting"}, "count8": {"kind": "counting", "dim": 8}})
    passages = passage_texts(corpus.titles, corpus.texts)
    bundle = PortfolioBundle(
        name="tiny-encoder", corpus=corpus, members=members, router=router, scoring=scoring,
        routing=RouterFeatures(hasher, tuple(encoders)),
        embeddings={name: e._embed(passages) for name, e in encoders.items()}, default_l=2,
        selection={"greedy_train_values": [0.5, 0.7, 0.8], "n_train": len(texts)},
    )
    return save_bundle(bundle, path)
