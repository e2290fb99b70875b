"""A tiny portfolio bundle over the tiny fixtures, with members that need no encoder model.

Members use BM25 only (BM25, a passage-graph walk from BM25 seeds, a two-hop BM25 retrieval) and
the router reads only the hashed text features, so a service loads it in about a second with no
model files, in this process or in a ``bentoml serve`` subprocess.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragfolio.core.artifacts import PortfolioBundle, save_bundle
from ragfolio.core.data import build_corpus
from ragfolio.core.features import TextHasher, query_features
from ragfolio.core.loading import load_folder
from ragfolio.core.pool import make_candidate
from ragfolio.core.router import Router
from ragfolio.core.routing.base import RouteInputs

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tiny"
MEMBERS = [
    ("bm25", {"k1": 0.9, "b": 0.75}),
    ("graph", {"seeds": "bm25", "n_seeds": 2, "rank": "ppr"}),
    ("two_hop", {"first": "bm25", "append": "title", "second": "bm25"}),
]
SCORING = {"num_docs": 3, "prefilter_depth": 12, "bm25_base": {}, "graph_max_degree": 20, "encoders": {}}


def questions() -> list[str]:
    return [q.question for q in load_folder(FIXTURES)]


def write_tiny_bundle(path: Path) -> dict:
    """Fit a small router on random utilities and save the bundle to ``path``; returns the manifest."""
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
        routing={"text_features": hasher.to_dict(), "encoders": []}, embeddings={}, default_l=2,
        selection={"greedy_train_values": [0.5, 0.7, 0.8], "n_train": len(texts)},
    )
    return save_bundle(bundle, path)
