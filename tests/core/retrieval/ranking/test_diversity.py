"""Greedy diversification on a hand-made 2-d corpus, and the batched code against naive loops."""

from __future__ import annotations

import numpy as np
import pytest

from ragfolio.core.retrieval.ranking import diversification
from ragfolio.core.retrieval.ranking.diversification import discounted_similarity, mmr, vendi
from ragfolio.core.retrieval.results import RetrievalResult

# Unit vectors at angle theta from the query (angle 0): rel = cos(theta), sim = cos(difference).
ANGLES = np.array([0.3, 0.35, -0.6, 1.4])  # p0, p1 (near-duplicate of p0), p2, p3
PASSAGES = np.stack([np.cos(ANGLES), np.sin(ANGLES)], axis=1).astype(np.float32)
QUERY = np.array([[1.0, 0.0]], dtype=np.float32)
REL = np.cos(ANGLES)


def prefilter(ids: list[list[int]]) -> RetrievalResult:
    doc_ids = np.asarray(ids, dtype=np.int64)
    return RetrievalResult(doc_ids, np.zeros(doc_ids.shape, dtype=np.float32))


SCRAMBLED = prefilter([[3, 1, 0, 2]])


def cos(a: int, b: int) -> float:
    return float(np.cos(ANGLES[a] - ANGLES[b]))


def test_mmr_lambda_one_is_relevance_order() -> None:
    out = mmr(SCRAMBLED, QUERY, PASSAGES, 4, lambda_=1.0)
    assert out.doc_ids.tolist() == [[0, 1, 2, 3]]
    np.testing.assert_allclose(out.scores[0], REL, rtol=1e-5)


def test_mmr_small_lambda_picks_the_diverse_passage() -> None:
    out = mmr(SCRAMBLED, QUERY, PASSAGES, 2, lambda_=0.3)
    # after p0: p1 .3*.939-.7*.999=-.417, p2 .3*.825-.7*.622=-.188, p3 .3*.170-.7*.454=-.267
    assert out.doc_ids.tolist() == [[0, 2]]
    expected = [0.3 * REL[0], 0.3 * REL[2] - 0.7 * cos(0, 2)]
    np.testing.assert_allclose(out.scores[0], expected, rtol=1e-5)


def test_ds_gamma_zero_is_relevance_order() -> None:
    out = discounted_similarity(SCRAMBLED, QUERY, PASSAGES, 4, gamma=0.0, r=0.0)
    assert out.doc_ids.tolist() == [[0, 1, 2, 3]]
    np.testing.assert_allclose(out.scores[0], (1 + REL) / 2, rtol=1e-5)


def test_ds_large_gamma_skips_the_near_duplicate() -> None:
    out = discounted_similarity(SCRAMBLED, QUERY, PASSAGES, 4, gamma=5.0, r=0.9)
    # only sim(p0, p1) = .999 reaches r, so p1 drops to (1+.939)/2 * exp(-5*.999) and goes last
    assert out.doc_ids.tolist() == [[0, 2, 3, 1]]
    expected = [(1 + REL[0]) / 2, (1 + REL[2]) / 2, (1 + REL[3]) / 2]
    expected.append((1 + REL[1]) / 2 * np.exp(-5.0 * cos(0, 1)))
    np.testing.assert_allclose(out.scores[0], expected, rtol=1e-5)


def test_ds_threshold_above_every_similarity_means_no_discount() -> None:
    out = discounted_similarity(SCRAMBLED, QUERY, PASSAGES, 4, gamma=50.0, r=0.9999)
    assert out.doc_ids.tolist() == [[0, 1, 2, 3]]


def test_vendi_s_zero_is_relevance_order() -> None:
    out = vendi(SCRAMBLED, QUERY, PASSAGES, 4, s=0.0)
    assert out.doc_ids.tolist() == [[0, 1, 2, 3]]
    np.testing.assert_allclose(out.scores[0], np.cumsum(REL) / np.arange(1, 5), rtol=1e-5)


def test_vendi_s_one_prefers_the_most_orthogonal_passage() -> None:
    out = vendi(SCRAMBLED, QUERY, PASSAGES, 2, s=1.0)
    # first the most relevant (p0); then max VS({p0, x}) = smallest |cos|: p3 (.454)
    assert out.doc_ids.tolist() == [[0, 3]]
    c = cos(0, 3)
    lam = np.array([(1 + c) / 2, (1 - c) / 2])  # eigenvalues of [[1, c], [c, 1]] / 2
    vendi_pair = np.exp(-(lam * np.log(lam)).sum())
    np.testing.assert_allclose(out.scores[0], [1.0, vendi_pair / 2], rtol=1e-5)


def test_vendi_of_orthogonal_pair_is_full() -> None:
    passages = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.8, 0.6, 0.0]], dtype=np.float32)
    query = np.array([[0.8, 0.6, 0.0]], dtype=np.float32)
    out = vendi(prefilter([[0, 1, 2]]), query, passages, 2, s=1.0)
    assert out.doc_ids.tolist() == [[2, 1]]  # cos(p2, p1) = .6 < cos(p2, p0) = .8
    full = vendi(prefilter([[1, 0]]), query, passages, 2, s=1.0)
    np.testing.assert_allclose(full.scores[0], [1.0, 1.0], rtol=1e-5)  # VS = 2 = |D|


@pytest.mark.parametrize(
    "family", [lambda p, q, e, k: mmr(p, q, e, k, lambda_=0.5),
               lambda p, q, e, k: discounted_similarity(p, q, e, k, gamma=2.0, r=0.2),
               lambda p, q, e, k: vendi(p, q, e, k, s=0.5)],
    ids=["mmr", "ds", "vendi"],
)
def test_pads_with_minus_one_when_fewer_candidates_than_k(family) -> None:
    pf = prefilter([[2, -1, 0, -1], [-1, -1, -1, -1]])
    out = family(pf, np.repeat(QUERY, 2, axis=0), PASSAGES, 3)
    assert out.doc_ids.shape == (2, 3) and out.doc_ids.dtype == np.int64
    assert out.scores.dtype == np.float32
    assert sorted(out.doc_ids[0, :2].tolist()) == [0, 2] and out.doc_ids[0, 2] == -1
    assert (out.doc_ids[1] == -1).all() and np.isneginf(out.scores[1]).all()
    wide = family(prefilter([[1, 3]]), QUERY, PASSAGES, 5)  # k beyond the prefilter depth
    assert wide.doc_ids[0, 2:].tolist() == [-1, -1, -1]


# Naive one-query-at-a-time references, written straight from the formulas.
def naive(ids, q, emb, k, criterion):
    chosen: list[int] = []
    cands = [d for d in ids if d >= 0]
    while cands and len(chosen) < k:
        best = max(cands, key=lambda d: (criterion(chosen, d), -cands.index(d)))
        chosen.append(best)
        cands.remove(best)
    return chosen


def mmr_crit(q, emb, lam):
    def crit(chosen, d):
        penalty = max((emb[d] @ emb[c] for c in chosen), default=0.0)
        return lam * (q @ emb[d]) - (1 - lam) * penalty
    return crit


def ds_crit(q, emb, gamma, r):
    def crit(chosen, d):
        score = (1 + q @ emb[d]) / 2
        for c in chosen:
            s = emb[d] @ emb[c]
            score *= np.exp(-gamma * (max(s, 0.0) if s >= r else 0.0))
        return score
    return crit


def vendi_crit(q, emb, s):
    def crit(chosen, d):
        if not chosen:
            return q @ emb[d]
        x = emb[chosen + [d]]
        lam = np.clip(np.linalg.eigvalsh(x @ x.T / len(x)), 0, None)
        vs = np.exp(-sum(v * np.log(v) for v in lam if v > 0))
        return s * vs / len(x) + (1 - s) * float(np.mean(x @ q))
    return crit


@pytest.mark.parametrize("name", ["mmr", "ds", "vendi"])
def test_batched_greedy_matches_naive_loop(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diversification, "_CHUNK", 7)  # several chunks, one ragged
    rng = np.random.default_rng(0)
    emb = rng.normal(size=(30, 5))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    queries = rng.normal(size=(20, 5))
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    ids = np.stack([rng.permutation(30)[:8] for _ in range(20)])
    ids[3, 5:] = -1
    pf = prefilter(ids.tolist())
    e32, q32 = emb.astype(np.float32), queries.astype(np.float32)
    if name == "mmr":
        out = mmr(pf, q32, e32, 4, lambda_=0.6)
        make = lambda q: mmr_crit(q, emb, 0.6)  # noqa: E731
    elif name == "ds":
        out = discounted_similarity(pf, q32, e32, 4, gamma=3.0, r=0.1)
        make = lambda q: ds_crit(q, emb, 3.0, 0.1)  # noqa: E731
    else:
        out = vendi(pf, q32, e32, 4, s=0.7)
        make = lambda q: vendi_crit(q, emb, 0.7)  # noqa: E731
    for i in range(20):
        want = naive(ids[i].tolist(), queries[i], emb, 4, make(queries[i]))
        assert out.doc_ids[i].tolist() == want


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: mmr(SCRAMBLED, QUERY, PASSAGES, 2, lambda_=1.5), "lambda_=1.5"),
        (lambda: vendi(SCRAMBLED, QUERY, PASSAGES, 2, s=-0.1), "s=-0.1"),
        (
            lambda: discounted_similarity(SCRAMBLED, QUERY, PASSAGES, 2, gamma=-1.0, r=0.5),
            "gamma=-1.0",
        ),
        (lambda: mmr(SCRAMBLED, QUERY, PASSAGES, 0, lambda_=0.5), "k=0"),
        (
            lambda: mmr(SCRAMBLED, np.ones((2, 2), np.float32), PASSAGES, 2, lambda_=0.5),
            "query_emb",
        ),
        (lambda: mmr(prefilter([[9]]), QUERY, PASSAGES, 2, lambda_=0.5), "out of range"),
    ],
)
def test_rejects_bad_arguments(call, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


@pytest.mark.parametrize(
    ("name", "value"), [("ds", (0.2, 0.0)), ("ds", (10.0, 0.0)), ("ds", (10.0, 0.9)), ("vendi", 0.0), ("vendi", 1.0)]
)
def test_the_paper_grids_extremes_match_the_naive_loop(name: str, value) -> None:
    """r = 0 (every positive similarity discounts), gamma up to 10, s = 0 and s = 1 (the paper's grid)."""
    rng = np.random.default_rng(3)
    emb = rng.normal(size=(30, 5))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    queries = rng.normal(size=(12, 5))
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    ids = np.stack([rng.permutation(30)[:10] for _ in range(12)])
    pf, e32, q32 = prefilter(ids.tolist()), emb.astype(np.float32), queries.astype(np.float32)
    if name == "ds":
        gamma, r = value
        out = discounted_similarity(pf, q32, e32, 4, gamma=gamma, r=r)
        make = lambda q: ds_crit(q, emb, gamma, r)  # noqa: E731
    else:
        out = vendi(pf, q32, e32, 4, s=value)
        make = lambda q: vendi_crit(q, emb, value)  # noqa: E731
    for i in range(12):
        assert out.doc_ids[i].tolist() == naive(ids[i].tolist(), queries[i], emb, 4, make(queries[i]))
    assert np.isfinite(out.scores).all()
    if name == "vendi" and value == 0.0:  # pure relevance order
        rel = (emb[ids] @ queries[:, :, None])[:, :, 0]
        want = np.take_along_axis(ids, np.argsort(-rel, axis=1, kind="stable")[:, :4], axis=1)
        np.testing.assert_array_equal(out.doc_ids, want)


def test_ds_threshold_zero_discounts_every_positive_similarity() -> None:
    # after p0, p3 (cos 0.45 to p0) is discounted at r = 0 but not at r = 0.5; p2 (cos -0.42 to p3)
    # is never discounted by p3
    at_zero = discounted_similarity(SCRAMBLED, QUERY, PASSAGES, 4, gamma=10.0, r=0.0)
    at_half = discounted_similarity(SCRAMBLED, QUERY, PASSAGES, 4, gamma=10.0, r=0.5)
    assert at_zero.doc_ids.tolist() == at_half.doc_ids.tolist() == [[0, 3, 2, 1]]
    p3 = (1 + REL[3]) / 2
    np.testing.assert_allclose([at_zero.scores[0, 1], at_half.scores[0, 1]], [p3 * np.exp(-10 * cos(0, 3)), p3],
                               rtol=1e-5)
