"""Seeds: passages spread over titles, kinds in proportion and prefix-stable, pairs linked by title."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from synthesis_corpus import company_corpus

from ragfolio.core.data.passages import Corpus
from ragfolio.core.synthesis.seeds import kind_sequence, plan_seeds, spread_rows, title_index, title_links

MIX = {"single": 0.5, "bridge": 0.3, "comparison": 0.2}


def _corpus(rows: list[tuple[str, str]]) -> Corpus:
    return Corpus(tuple(f"p{i}" for i in range(len(rows))), tuple(t for t, _ in rows), tuple(x for _, x in rows))


def test_spread_rows_gives_every_title_once_before_any_title_twice() -> None:
    titles = ["Alpha"] * 4 + ["Beta"] + ["Gamma"] * 2 + ["Delta"] * 3
    corpus = _corpus([(t, f"text {i}") for i, t in enumerate(titles)])
    for seed in range(5):
        order = spread_rows(corpus, random.Random(seed))
        assert sorted(order) == list(range(len(titles)))  # every row once
        seen: Counter[str] = Counter()
        rounds = []  # a row's round: how many passages of its title came up to it
        for row in order:
            seen[titles[row]] += 1
            rounds.append(seen[titles[row]])
        assert rounds == sorted(rounds)  # no title a second time before every title once, and so on
        first_round = [titles[r] for r in order[:4]]
        assert sorted(first_round) == ["Alpha", "Beta", "Delta", "Gamma"]
        assert {titles[r] for r in order[4:7]} == {"Alpha", "Gamma", "Delta"}  # round two: the titles with two
    assert spread_rows(corpus, random.Random(1)) == spread_rows(corpus, random.Random(1))


def test_kind_sequence_keeps_the_mix_in_every_prefix() -> None:
    kinds = kind_sequence(100, MIX)
    assert Counter(kinds) == {"single": 50, "bridge": 30, "comparison": 20}
    for i in range(1, 101):  # every prefix within one question of its share
        counts = Counter(kinds[:i])
        assert all(abs(counts[k] - share * i) < 1 for k, share in MIX.items()), (i, counts)
    assert kinds[:3] == ["single", "bridge", "comparison"]
    assert kind_sequence(7, {"single": 2, "bridge": 0}) == ["single"] * 7  # shares need not sum to 1; 0 is never drawn


def test_kind_sequence_for_n_begins_with_the_one_for_fewer() -> None:
    longest = kind_sequence(40, MIX)
    for m in (0, 1, 5, 13, 39):
        assert kind_sequence(m, MIX) == longest[:m]


@pytest.mark.parametrize("mix", [{"single": 1.0, "essay": 0.5}, {"single": -1.0, "bridge": 2.0}, {"single": 0.0}, {}])
def test_kind_sequence_refuses_a_bad_mix(mix: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="mix="):
        kind_sequence(3, mix)


def test_title_links_find_other_titles_as_whole_words_longest_first() -> None:
    corpus = _corpus([
        ("Harbour", "The Harbourmaster met the Harbour Works crew; Harbour and Quill Sensor too. Harbour Works again."),
        ("Harbour Works", "A factory."),
        ("Quill Sensor", "A sensor named after the Harbour."),
        ("Harbourmaster", "A job."),
        ("Quill", "A pen."),
        ("US", "A title of two letters is never looked for."),
    ])
    index = title_index(corpus)
    assert "us" not in index
    # row 0 names Harbour Works (2 words) and Quill Sensor (2), Harbourmaster and Quill (1); not its own title
    assert title_links(corpus, 0, index) == [1, 2, 3, 4]
    assert title_links(corpus, 2, index) == [0]  # "Harbour", not a part of a longer word
    assert title_links(corpus, 1, index) == []


def test_title_links_on_the_company_passages() -> None:
    corpus = company_corpus()
    index = title_index(corpus)
    founder = [corpus.titles[r] for r in title_links(corpus, 0, index)]
    assert founder == ["Tessa Lind", "Harbour Works", "Quill Sensor", "Norrvik"]
    assert title_links(corpus, corpus.titles.index("Heron Buoy"), index) == []


def test_plan_seeds_is_seeded_prefix_stable_and_starts_each_seed_at_its_own_passage() -> None:
    corpus = company_corpus()
    plan = plan_seeds(corpus, 12, MIX, seed=3)
    assert plan == plan_seeds(corpus, 12, MIX, seed=3)
    assert plan != plan_seeds(corpus, 12, MIX, seed=4)
    assert plan_seeds(corpus, 5, MIX, seed=3) == plan[:5]
    assert len(plan) == 12 and [s.kind for s in plan] == kind_sequence(12, MIX)
    firsts = [s.rows[0] for s in plan]
    assert len(set(firsts)) == len(firsts)  # no passage starts two seeds
    assert plan_seeds(corpus, 30, MIX, seed=3)[:12] == plan  # the corpus runs out: no more than its passages
    assert len(plan_seeds(corpus, 30, MIX, seed=3)) == 12


def test_bridge_seeds_follow_a_title_link_else_a_neighbour() -> None:
    corpus = company_corpus()
    index = title_index(corpus)
    plan = plan_seeds(corpus, 12, {"bridge": 1.0}, seed=0)
    assert {s.link for s in plan} == {"title", "neighbour"}
    for seed in plan:
        first, second = seed.rows
        links = title_links(corpus, first, index)
        assert seed.link == ("title" if links else "neighbour")
        if links:
            assert second == links[0]
        assert corpus.titles[second] != corpus.titles[first]
    comparison = plan_seeds(corpus, 6, {"comparison": 1.0}, seed=0)
    assert all(s.link == "neighbour" and len(s.rows) == 2 for s in comparison)
    single = plan_seeds(corpus, 4, {"single": 1.0}, seed=0)
    assert all(s.link == "" and len(s.rows) == 1 for s in single)
    assert single[0].key(corpus) == f"single:{corpus.ids[single[0].rows[0]]}"
