"""Vendi-RAG as its reference code runs it: greedy VRS, the judge's score times answer support, the
EMA on s, best-answer tracking, T rounds; scripted LLMs on the tiny corpus (hashing encoders), then
the real model."""

from __future__ import annotations

import itertools

import pytest
from fake_encoders import install_hashing_encoder, tiny_runner

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.llm.chat import Completion
from ragfolio.core.llm.native import LlamaCppBackend
from ragfolio_lab.answering.vendi_rag import (
    INITIAL_S,
    MAX_ITERATIONS,
    TAU,
    VendiRAG,
    answer_support,
    judge_messages,
    parse_score,
)

QUESTION = (
    "The members of the von Trapp musical group are related to which woman who wrote "
    '"The Story of the Trapp Family Singers"?'
)


class JudgedBackend:
    """Answers with the first passage title shown (or a scripted answer), scores by script, rewrites queries.

    ``answers``: replies to answer prompts in turn (``None``: the first passage's title, which the
    passages support); ``scores``: replies to judge prompts in turn.
    """

    def __init__(self, scores: list[str], answers: list[str | None] | None = None) -> None:
        self.scores, self.answers = list(scores), list(answers or [])
        self.kinds: list[str] = []
        self.prompts: list[str] = []

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        prompt = messages[-1]["content"]
        self.prompts.append(prompt)
        if prompt.startswith("Rate from 1 to 10"):
            self.kinds.append("judge")
            return Completion(self.scores.pop(0), 100, 1, 3.0)
        if prompt.startswith("The answer found so far"):
            self.kinds.append("refine")
            return Completion("Who wrote the book about the Trapp family singers?", 40, 10, 4.0)
        self.kinds.append("answer")
        scripted = self.answers.pop(0) if self.answers else None
        if scripted is not None:
            return Completion(scripted, 80, 3, 5.0)
        title = prompt.rsplit("Passages:\n", 1)[1].split("[1] ", 1)[1].split(":")[0]
        return Completion(title, 80, 3, 5.0)


@pytest.fixture
def runner(tiny_dir, monkeypatch):
    install_hashing_encoder(monkeypatch)
    return tiny_runner(tiny_dir)[0]


@pytest.mark.parametrize(
    ("reply", "score"),
    [("8", 0.8), ("Score: 7/10", 0.7), ("10", 1.0), ("0", None), ("Yes", 1.0), ("**No**", 0.0), ("", None),
     ("Maybe", None), ("It is 3.5", 0.35)],
)
def test_parse_score(reply: str, score: float | None) -> None:
    assert parse_score(reply) == (None if score is None else pytest.approx(score))


def test_answer_support_counts_the_answer_words_found_in_the_passages() -> None:
    passages = [("Eiffel Tower", "The tower stands in Paris, France.")]
    assert answer_support("Paris", passages) == 1.0
    assert answer_support("the Eiffel Tower", passages) == 1.0  # articles are dropped
    assert answer_support("Paris, Texas", passages) == 0.5
    assert answer_support("", passages) == 0.0 and answer_support("London", passages) == 0.0


def test_retrieve_picks_by_the_authors_vrs_over_the_pool_and_returns_corpus_rows(runner) -> None:
    """The pool is the prefilter's ranking; at s = 0 VRS is relevance alone, so the picks are its head."""
    vendi = VendiRAG(Answerer(JudgedBackend([])), runner, num_docs=2)
    pool = [int(r) for r in runner.base(vendi.prefilter, [QUESTION]).doc_ids[0] if r >= 0]
    assert vendi.retrieve(QUESTION, 0.0) == pool[:2]
    diverse = vendi.retrieve(QUESTION, 1.0)
    assert len(set(diverse)) == 2 and set(diverse) <= set(pool) and diverse[0] == pool[0]


def test_judge_prompt_shows_passages_question_and_answer() -> None:
    (msg,) = judge_messages("Q?", "Paris", [("Eiffel Tower", "It is in Paris.")])
    assert msg["role"] == "user" and msg["content"].endswith("Proposed answer: Paris\nScore:")
    assert "[1] Eiffel Tower: It is in Paris." in msg["content"]


def test_defaults_are_the_reference_codes() -> None:
    assert (INITIAL_S, TAU, MAX_ITERATIONS) == (0.8, 0.85, 5)


def test_low_scores_iterate_with_the_ema_on_s_until_accepted(runner) -> None:
    backend = JudgedBackend(["3", "2", "9"])
    result = VendiRAG(Answerer(backend), runner, num_docs=3).run(QUESTION)
    assert result.iterations == 3 and result.accepted and [r.accepted for r in result.rounds] == [False, False, True]
    # Q = support (1: the answer is a passage title) x score; s <- 0.3 s + 0.7 clip(1 - Q / best Q)
    s2 = 0.3 * 0.8 + 0.7 * 0.0
    s3 = 0.3 * s2 + 0.7 * (1 - 0.2 / 0.3)
    assert result.s_history == pytest.approx([0.8, s2, s3])
    assert [r.quality for r in result.rounds] == pytest.approx([0.3, 0.2, 0.9])
    assert backend.kinds == ["answer", "judge", "refine", "answer", "judge", "refine", "answer", "judge"]
    assert result.rounds[1].query == "Who wrote the book about the Trapp family singers?"  # the LLM's refinement
    assert result.answer == result.rounds[2].answer and result.doc_ids == result.rounds[2].doc_ids
    assert len(result.completions) == 8 and result.tokens == sum(c.tokens for c in result.completions)
    assert result.judged == 3 and 0 < result.retrieval_ms < result.latency_ms


def test_an_answer_the_passages_do_not_contain_is_never_accepted(runner) -> None:
    """The judge says 10 every time, but the answer is in none of the passages: T rounds, no acceptance."""
    backend = JudgedBackend(["10"] * 5, answers=["Napoleon Bonaparte"] * 5)
    result = VendiRAG(Answerer(backend), runner, num_docs=3, refine_query="append").run(QUESTION)
    assert result.iterations == MAX_ITERATIONS and not result.accepted
    assert all(r.support == 0.0 and r.score == 1.0 and r.quality == 0.0 for r in result.rounds)
    assert "refine" not in backend.kinds  # append: no LLM call
    assert result.rounds[1].query.startswith(QUESTION + " Napoleon Bonaparte")


def test_the_best_scored_answer_is_returned_when_none_is_accepted(runner) -> None:
    backend = JudgedBackend(["4", "7", "7"])
    result = VendiRAG(Answerer(backend), runner, num_docs=3, max_iterations=3, dynamic_s=False).run(QUESTION)
    assert not result.accepted and result.s_history == [0.8, 0.8, 0.8]
    assert result.answer == result.rounds[1].answer  # 0.7 first reached in round 2 (the earliest of ties)


def test_empty_answer_gets_no_judge_call_and_an_unparseable_score_is_neutral(runner) -> None:
    backend = JudgedBackend(["maybe"], answers=["", None])
    result = VendiRAG(Answerer(backend), runner, num_docs=3, max_iterations=2).run(QUESTION)
    assert backend.kinds == ["answer", "refine", "answer", "judge"]
    assert result.rounds[0].score is None and result.rounds[0].quality == 0.0
    assert result.rounds[1].quality == pytest.approx(0.5) and result.answer == result.rounds[1].answer


def test_invalid_settings_name_the_value(runner) -> None:
    answerer = Answerer(JudgedBackend([]))
    for kwargs, message in [({"s_init": 1.5}, "s_init=1.5"), ({"max_iterations": 0}, "max_iterations=0"),
                            ({"tau": -0.1}, "tau=-0.1"), ({"refine_query": "cot"}, "refine_query='cot'")]:
        with pytest.raises(ValueError, match=message):
            VendiRAG(answerer, runner, **kwargs)


@pytest.mark.slow
def test_real_model_answers_within_max_iterations(runner) -> None:
    result = VendiRAG(Answerer(LlamaCppBackend("gemma-3-270m")), runner, num_docs=3, max_iterations=2).run(QUESTION)
    assert result.answer and 1 <= result.iterations <= 2, [r.answer for r in result.rounds]
    kinds = len(result.completions)
    assert kinds in range(result.iterations, 3 * result.iterations)  # answer, judge, refine (not after the last)
    assert result.tokens == sum(c.tokens for c in result.completions) > 0


def test_round_counts_are_consistent_over_scripts(runner) -> None:
    for scores in itertools.product(["2", "9"], repeat=2):
        result = VendiRAG(Answerer(JudgedBackend(list(scores) + ["2"] * 3)), runner, num_docs=3).run(QUESTION)
        stop = scores.index("9") + 1 if "9" in scores else MAX_ITERATIONS
        assert result.iterations == stop and result.accepted == ("9" in scores)
