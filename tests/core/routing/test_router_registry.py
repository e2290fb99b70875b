"""Routers by name: every registered kind saves, loads by name and routes the same; adding a kind."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from ragfolio.core.routing import registry
from ragfolio.core.routing.base import RouteInputs, check_l, member_names, ranked, read_config, write_config
from ragfolio.core.routing.features.query_features import TextHasher, query_features
from ragfolio.core.routing.registry import load_router, make_router, register_router, router_names
from ragfolio.core.routing.routers.learned import Router

K = 3
PARAMS: dict[str, dict[str, Any]] = {
    "learned": {"hidden": 8, "embedding_dim": 4, "max_epochs": 5, "random_state": 0},
    "random": {"random_state": 7},
    "logistic": {"C": 2.0},
    "pre_retrieval": {"min_z": 0.0, "min_questions": 5},
    "post_retrieval": {"min_z": 0.0, "min_questions": 5, "completion": "top"},
    "cascade": {"members_run": 2, "cross_member_columns": [2], "pre": {"min_z": 0.0, "min_questions": 5},
                "post": {"min_z": 0.0, "min_questions": 5}},
}


def _data(n: int, seed: int) -> tuple[RouteInputs, np.ndarray]:
    rng = np.random.default_rng(seed)
    topic = rng.integers(0, K, n)
    texts = [f"{['river', 'mountain', 'violin'][t]} question {i}" for i, t in enumerate(topic)]
    U = rng.random((n, K)).round(1).astype(np.float32)
    U[np.arange(n), topic] = 1.0
    dense = {"minilm": rng.normal(size=(n, 6)).astype(np.float32)}
    query = {**query_features(texts, dense, TextHasher(n_features=64)), "first_stage": rng.normal(size=(n, 4))}
    members = rng.normal(size=(n, K, 3)) + 2.0 * (U == 1.0)[:, :, None]  # the retrieval routers' results block
    return RouteInputs(query, {"utility": U, "members": members}), U


def test_the_learned_router_and_every_ablation_are_registered() -> None:
    assert router_names() == [  # the built-ins (the learned router first, then by name), then the lab's by entry point
        "learned", "cascade", "greedy_prefix", "logistic", "nearest_neighbour", "oracle", "post_retrieval",
        "pre_retrieval", "random", "top_average", "paper",
    ]
    assert registry.router_class("learned") is Router


@pytest.mark.parametrize("name", router_names())
def test_every_router_saves_loads_by_name_and_routes_the_same(name: str, tmp_path: Path) -> None:
    train, U = _data(40, seed=0)
    test, _ = _data(15, seed=1)
    router = make_router(name, **PARAMS.get(name, {})).fit(train, U, ["a", "b", "c"])
    router.save(tmp_path / name)
    assert json.loads((tmp_path / name / "router.json").read_text())["name"] == name
    loaded = load_router(tmp_path / name)
    assert type(loaded) is type(router) and loaded.members_ == ["a", "b", "c"]
    for l in range(1, K + 1):
        picks, scores = router.route(test, l)
        again, loaded_scores = loaded.route(test, l)
        assert picks.shape == (15, l)
        np.testing.assert_array_equal(again, picks)
        np.testing.assert_array_equal(loaded_scores, scores)
    with pytest.raises(ValueError, match=f"l={K + 1} must be in 1..{K}"):
        loaded.route(test, K + 1)


def test_nearest_neighbours_route_by_the_most_similar_train_questions() -> None:
    train, U = _data(40, seed=5)
    alone = make_router("nearest_neighbour", n_neighbours=1).fit(train, U)
    picks, scores = alone.route(train, 1)  # each train question is its own nearest neighbour
    np.testing.assert_array_equal(scores, U)
    assert (U[np.arange(40), picks[:, 0]] == U.max(axis=1)).all()
    everyone = make_router("nearest_neighbour", n_neighbours=100).fit(train, U)  # more than there are
    np.testing.assert_allclose(everyone.route(train, 1)[1], np.tile(U.mean(axis=0), (40, 1)), rtol=1e-6)
    with pytest.raises(ValueError, match="n_neighbours=0"):
        make_router("nearest_neighbour", n_neighbours=0)


def test_a_router_json_without_a_name_is_a_learned_router(tmp_path: Path) -> None:
    train, U = _data(30, seed=2)
    router = Router(hidden=8, embedding_dim=4, max_epochs=3, random_state=0).fit(train, U)
    router.save(tmp_path)
    config = json.loads((tmp_path / "router.json").read_text())
    del config["name"]  # as saved before routers had names
    (tmp_path / "router.json").write_text(json.dumps(config))
    loaded = load_router(tmp_path)
    assert isinstance(loaded, Router)
    np.testing.assert_array_equal(loaded.route(train, 2)[0], router.route(train, 2)[0])


def test_loading_names_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"unknown router 'knn'; registered: \['learned'"):
        make_router("knn")
    with pytest.raises(FileNotFoundError, match="router.json"):
        load_router(tmp_path)
    train, U = _data(20, seed=3)
    make_router("top_average").fit(train, U).save(tmp_path)
    with pytest.raises(ValueError, match="holds a 'top_average' router, not a 'learned' one"):
        Router.load(tmp_path)


# The "A router" example of docs/extending.md, as written there.
@dataclass
class CentroidRouter:
    """Scores each member by the cosine of the query to the centroid of the train questions it won."""

    name: ClassVar[str] = "centroid"
    block: str = "minilm"  # the dense query-feature block compared by cosine
    members_: list[str] = field(default_factory=list, init=False)

    def _unit(self, inputs: RouteInputs) -> np.ndarray:
        x = np.asarray(inputs.query[self.block], dtype=np.float32)
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    def fit(self, inputs: RouteInputs, U: np.ndarray, members: Sequence[str] | None = None) -> Self:
        x, U = self._unit(inputs), np.asarray(U, dtype=np.float32)
        self.members_ = member_names(members, U.shape[1])
        won = U == U.max(axis=1, keepdims=True)                 # (n, k): the tied-best members
        centroids = (won.T @ x) / np.maximum(won.sum(axis=0), 1)[:, None]
        self.centroids_ = centroids / np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
        return self

    def route(self, inputs: RouteInputs, l: int) -> tuple[np.ndarray, np.ndarray]:
        check_l(l, len(self.members_))
        scores = self._unit(inputs) @ self.centroids_.T          # (n, k)
        return ranked(scores, l), scores

    def save(self, folder: str | Path) -> None:
        path = write_config(folder, self.name, {"block": self.block, "members": self.members_})
        save_file({"centroids": self.centroids_}, str(path / "router.safetensors"))

    @classmethod
    def load(cls, folder: str | Path) -> Self:
        config = read_config(folder, cls.name)
        router = cls(block=config["block"])
        router.centroids_ = load_file(str(Path(folder) / "router.safetensors"))["centroids"]
        router.members_ = config["members"]
        return router


def test_a_new_router_is_registered_made_and_loaded_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_ROUTERS", dict(registry._ROUTERS))  # leave the real registry as it was
    register_router(CentroidRouter)
    train, U = _data(40, seed=4)
    router = make_router("centroid", block="minilm").fit(train, U, ["a", "b", "c"])
    router.save(tmp_path)
    loaded = load_router(tmp_path)
    assert isinstance(loaded, CentroidRouter) and loaded.block == "minilm"
    np.testing.assert_array_equal(loaded.route(train, 2)[0], router.route(train, 2)[0])
    assert register_router(CentroidRouter) is CentroidRouter  # registering again is harmless

    @dataclass
    class Impostor(CentroidRouter):
        name: ClassVar[str] = "learned"

    with pytest.raises(ValueError, match="'learned' is taken by ragfolio.core.routing.routers.learned.Router"):
        register_router(Impostor)
