"""The router: learns a known routing rule, handles ties, round-trips, completes sets greedily."""

import numpy as np
import pytest

from ragfolio.core.routing.base import RouteInputs
from ragfolio.core.routing.features.query_features import TextHasher, query_features
from ragfolio.core.routing.routers.learned import Router, routing_targets, tied_best

TOPICS = ["river", "mountain", "violin"]


def _synthetic(n: int, seed: int):
    """Queries whose best member is the topic word they contain (member j <-> TOPICS[j])."""
    rng = np.random.default_rng(seed)
    filler = ["who", "what", "when", "is", "the", "of", "a", "famous", "old", "city", "name", "year"]
    topic = rng.integers(0, 3, n)
    texts = [" ".join([*rng.choice(filler, 4), TOPICS[t], *rng.choice(filler, 3)]) for t in topic]
    U = np.full((n, 3), 0.5, dtype=np.float32)
    U[np.arange(n), topic] = 1.0
    noise = {"noise": rng.normal(size=(n, 8)).astype(np.float32)}
    return RouteInputs(query_features(texts, noise, TextHasher(n_features=256))), U, topic


@pytest.fixture(scope="module")
def fitted():
    X, U, _ = _synthetic(300, seed=0)
    return Router(hidden=32, embedding_dim=16, max_epochs=60, patience=15, random_state=0).fit(X, U, ["a", "b", "c"])


def test_router_learns_a_text_rule(fitted) -> None:
    X, _, topic = _synthetic(200, seed=1)
    accuracy = float((fitted.route(X, 1)[0][:, 0] == topic).mean())
    assert accuracy > 0.9, accuracy
    assert fitted.members_ == ["a", "b", "c"] and fitted.val_best_of_1_ > 0.9


def test_save_load_round_trip_gives_identical_predictions(fitted, tmp_path) -> None:
    X, _, _ = _synthetic(50, seed=2)
    fitted.save(tmp_path / "r")
    loaded = Router.load(tmp_path / "r")
    np.testing.assert_array_equal(loaded.scores(X.query), fitted.scores(X.query))
    for l in (1, 2, 3):
        np.testing.assert_array_equal(loaded.route(X, l)[0], fitted.route(X, l)[0])
    assert loaded.members_ == fitted.members_ and loaded.inputs_ == fitted.inputs_
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["router.json", "router.safetensors"]


def test_load_names_the_missing_file(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="router.json"):
        Router.load(tmp_path)


def test_predict_checks_l_and_feature_blocks(fitted) -> None:
    X, _, _ = _synthetic(5, seed=3)
    with pytest.raises(ValueError, match="l=4 must be in 1..3"):
        fitted.route(X, 4)[0]
    with pytest.raises(ValueError, match=r"\['noise'\] are missing"):
        fitted.scores({"text": X.query["text"]})
    with pytest.raises(RuntimeError, match="not fitted"):
        Router().scores(X.query)


def test_tie_aware_targets() -> None:
    U = np.array([[1, 1, 0, 0], [0.5, 1, 0, 0.5], [0, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=np.float32)
    targets, keep = routing_targets(U, max_ties=2)
    np.testing.assert_allclose(targets[0], [0.5, 0.5, 0, 0])
    np.testing.assert_allclose(targets[1], [0, 1, 0, 0])
    # no winner (all zero) and more than max_ties tied-best members are dropped
    assert keep.tolist() == [True, True, False, False, False]
    assert tied_best(U)[3].tolist() == [True, True, True, False]


def test_ties_are_learned_as_equally_good() -> None:
    """Members 0 and 1 always tie: the router must not prefer member 2, which never wins."""
    X, _, _ = _synthetic(120, seed=4)
    U = np.tile(np.array([[1.0, 1.0, 0.0]], dtype=np.float32), (120, 1))
    router = Router(hidden=16, embedding_dim=8, max_epochs=30, patience=30, random_state=0).fit(X, U)
    assert set(router.route(X, 2)[0].ravel().tolist()) == {0, 1}


def test_greedy_completion_picks_a_complementary_member() -> None:
    """0 and 1 win the same questions, 2 wins the rest: the second pick after 0 must be 2, not 1."""
    n = 90
    X, _, _ = _synthetic(n, seed=5)
    U = np.zeros((n, 3), dtype=np.float32)
    U[:60, 0], U[:60, 1], U[60:, 2] = 1.0, 0.95, 1.0
    router = Router(hidden=16, embedding_dim=8, max_epochs=40, neighbour_temperature=10.0, random_state=0).fit(X, U)
    picks = router.route(X, 2)[0]
    # whatever comes first, the second pick completes it: 0 or 1 -> 2; 2 -> 0 (the better of the pair)
    expected_second = np.where(picks[:, 0] == 2, 0, 2)
    np.testing.assert_array_equal(picks[:, 1], expected_second)
    plain = Router(hidden=16, embedding_dim=8, max_epochs=40, neighbour_temperature=None, random_state=0).fit(X, U)
    assert plain.route(X, 2)[0].shape == (n, 2)


def test_fit_rejects_mismatched_rows() -> None:
    X, U, _ = _synthetic(20, seed=6)
    with pytest.raises(ValueError, match="10 utility rows"):
        Router().fit(X.take(range(20)), U[:10])
    with pytest.raises(ValueError, match="2 member names for 3"):
        Router().fit(X, U, members=["a", "b"])


def test_switch_margin_keeps_the_default_member_unless_a_query_leads_clearly() -> None:
    X, U, topic = _synthetic(200, seed=7)
    never = Router(hidden=32, embedding_dim=16, max_epochs=40, switch_margin=2.5, random_state=0).fit(X, U)
    assert never.default_ == int(np.argmax(U.mean(axis=0)))
    assert (never.route(X, 1)[0][:, 0] == never.default_).all()  # cosines differ by at most 2
    tuned = Router(hidden=32, embedding_dim=16, max_epochs=40, random_state=0).fit(X, U)
    assert tuned.switch_margin_ in (0.0, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 2.5)
    assert (tuned.route(X, 1)[0][:, 0] == topic).mean() > 0.9  # here the text says which member wins
    picks = tuned.route(X, 3)[0]
    assert (np.sort(picks, axis=1) == np.arange(3)).all()  # a full routing is a permutation
