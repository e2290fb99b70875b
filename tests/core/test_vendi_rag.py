"""Vendi-RAG on the tiny fixture corpus: the judge loop with a scripted backend, then the real model."""

from __future__ import annotations

import pytest

from ragfolio.core.answering import Answerer
from ragfolio.core.cache import ArrayCache
from ragfolio.core.data import build_corpus
from ragfolio.core.embedded_llm import TransformersBackend
from ragfolio.core.llm import Completion
from ragfolio.core.loading import load_folder
from ragfolio.core.pool_runner import PoolRunner
from ragfolio.core.vendi_rag import VendiRAG, judge_messages, parse_judgement

QUESTION = (
    "The members of the von Trapp musical group are related to which woman who wrote "
    '"The Story of the Trapp Family Singers"?'
)


class ScriptedBackend:
    """Replies with the given texts in order; records the prompts."""

    def __init__(self, *replies: str) -> None:
        self.replies, self.calls = list(replies), []

    def complete(self, messages, *, max_tokens, temperature=0.0) -> Completion:
        self.calls.append(messages[0]["content"])
        return Completion(self.replies.pop(0), 100, 3, 5.0)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> ArrayCache:
    """Shared by the module's runners, so the corpus is encoded once."""
    return ArrayCache(tmp_path_factory.mktemp("vendi_rag_cache"))


@pytest.fixture
def runner(tiny_dir, encoders, cache) -> PoolRunner:
    corpus = build_corpus(load_folder(tiny_dir))
    return PoolRunner(corpus.titles, corpus.texts, {"minilm": encoders["minilm"]}, cache,
                      num_docs=4, prefilter_depth=20)


@pytest.mark.parametrize(
    ("reply", "verdict"),
    [("Yes", True), ("yes.", True), ("**No**", False), ("No, it is not.", False), ("Correct", True),
     ("The answer is yes", True), ("I think no", False), ("", None), ("Maybe", None)],
)
def test_parse_judgement(reply: str, verdict: bool | None) -> None:
    assert parse_judgement(reply) is verdict


def test_judge_prompt_shows_passages_question_and_answer() -> None:
    (msg,) = judge_messages("Q?", "Paris", [("Eiffel Tower", "It is in Paris.")])
    assert msg["role"] == "user"
    assert "[1] Eiffel Tower: It is in Paris." in msg["content"] and "Proposed answer: Paris" in msg["content"]


def test_rejection_raises_s_and_repeats_until_accepted(runner) -> None:
    backend = ScriptedBackend("Georg von Trapp", "No.", "Maria von Trapp", "Yes")
    result = VendiRAG(Answerer(backend), runner, s_init=0.3, s_step=0.2).run(QUESTION)
    assert result.answer == "Maria von Trapp" and result.iterations == 2
    assert result.s_history == pytest.approx([0.3, 0.5])
    assert len(result.completions) == 4 and backend.replies == []
    assert (result.prompt_tokens, result.completion_tokens, result.tokens) == (400, 12, 412)
    assert len(result.doc_ids) == 4 and len(set(result.doc_ids)) == 4
    assert all(0 <= i < len(runner.texts) for i in result.doc_ids)
    assert "Proposed answer: Georg von Trapp" in backend.calls[1]
    assert result.latency_ms > 0


def test_never_accepted_stops_at_max_iterations_with_s_capped(runner) -> None:
    backend = ScriptedBackend("A", "no", "B", "no", "C", "no")
    result = VendiRAG(Answerer(backend), runner, s_init=0.5, s_step=0.3, max_iterations=3).run(QUESTION)
    assert (result.answer, result.iterations) == ("C", 3)
    assert result.s_history == pytest.approx([0.5, 0.8, 0.9])


def test_empty_answer_is_rejected_without_a_judge_call(runner) -> None:
    backend = ScriptedBackend("", "Maria von Trapp", "yes")
    result = VendiRAG(Answerer(backend), runner, max_iterations=2).run(QUESTION)
    assert (result.answer, result.iterations, len(result.completions)) == ("Maria von Trapp", 2, 3)


def test_invalid_settings_name_the_value(runner) -> None:
    with pytest.raises(ValueError, match="s_init=1.5"):
        VendiRAG(Answerer(ScriptedBackend()), runner, s_init=1.5)
    with pytest.raises(ValueError, match="max_iterations=0"):
        VendiRAG(Answerer(ScriptedBackend()), runner, max_iterations=0)


@pytest.mark.slow
def test_real_model_answers_within_max_iterations(runner) -> None:
    result = VendiRAG(Answerer(TransformersBackend()), runner, max_iterations=2).run(QUESTION)
    assert result.answer and 1 <= result.iterations <= 2
    assert len(result.completions) in range(result.iterations, 2 * result.iterations + 1)
    assert result.tokens == sum(c.tokens for c in result.completions) > 0
