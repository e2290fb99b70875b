"""The authors' Vendi-RAG loop (the vendirag package) with ragfolio's LLM, pool and encoder: a scripted
LLM that writes the JSON the loop's prompts ask for, on the tiny corpus (hashing encoders)."""

from __future__ import annotations

import json

import pytest
from fake_encoders import install_hashing_encoder, tiny_runner

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.llm.chat import Completion
from ragfolio_lab.answering.vendi_rag import VendiRAG
from ragfolio_lab.answering.vendirag_loop import MAX_TOKENS, AuthorsVendiRAG, RecordingLLM

QUESTION = "Which woman wrote The Story of the Trapp Family Singers?"


class JsonBackend:
    """Replies as vendirag's prompts ask (JSON), judging by script; records each prompt's token limit."""

    def __init__(self, judgements: list[int], answer: str = "Maria von Trapp") -> None:
        self.judgements, self.answer = list(judgements), answer
        self.limits: list[tuple[str, int]] = []

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        prompt = messages[-1]["content"]
        if "evaluating the quality of answers" in prompt:
            score = self.judgements.pop(0)
            reply, step = {"coherence": score, "relevance": score, "query_alignment": score}, "judge"
        elif prompt.startswith("Generate step-by-step"):
            reply, step = {"reasoning": "The passages name the author."}, "cot"
        elif prompt.startswith("The current answer is incomplete"):
            reply, step = {"refined_question": "Who wrote the book about the Trapp family?"}, "refine"
        else:
            reply, step = {"answer": self.answer}, "answer"
        self.limits.append((step, max_tokens))
        return Completion(json.dumps(reply), 100, 10, 2.0)


@pytest.fixture
def runner(tiny_dir, monkeypatch):
    install_hashing_encoder(monkeypatch)
    return tiny_runner(tiny_dir)[0]


def test_a_high_judgement_stops_the_loop_after_one_round(runner) -> None:
    backend = JsonBackend([9])
    result = AuthorsVendiRAG(Answerer(backend), runner, num_docs=2).run(QUESTION)
    assert result.answer == "Maria von Trapp" and result.iterations == 1 and result.accepted
    assert [step for step, _ in backend.limits] == ["cot", "answer", "judge"]
    assert all(limit == MAX_TOKENS[step] for step, limit in backend.limits)  # each step's own limit
    assert result.rounds[0].quality == pytest.approx(0.9) and len(result.doc_ids) == 2
    assert result.tokens == 3 * 110 and len(result.completions) == 3


def test_low_judgements_refine_and_run_every_round_keeping_the_best(runner) -> None:
    backend = JsonBackend([3, 7, 4])
    result = AuthorsVendiRAG(Answerer(backend), runner, num_docs=2, max_iterations=3).run(QUESTION)
    assert result.iterations == 3 and not result.accepted
    assert [round(r.quality, 2) for r in result.rounds] == [0.3, 0.7, 0.4]
    assert result.doc_ids == result.rounds[1].doc_ids  # the best-judged round's passages
    assert result.rounds[1].query == "Who wrote the book about the Trapp family?"
    assert [step for step, _ in backend.limits].count("refine") == 2


def test_the_authors_selection_is_the_ports_on_the_same_pool(runner) -> None:
    """Both loops pick a round's passages with vendirag's VRS over the same prefilter pool."""
    answerer = Answerer(JsonBackend([]))
    for s in (0.0, 0.5, 0.8, 1.0):
        assert AuthorsVendiRAG(answerer, runner, num_docs=3).retrieve(QUESTION, s) == \
            VendiRAG(answerer, runner, num_docs=3).retrieve(QUESTION, s)


def test_unparseable_replies_give_empty_answers_and_neutral_judgements(runner) -> None:
    """What the embedded base model's prose does to the loop: no JSON, no answer, Q = 0.5 every round."""

    class Prose:
        def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
            return Completion("Please provide the following information:", 50, 8, 1.0)

    result = AuthorsVendiRAG(Answerer(Prose()), runner, num_docs=2, max_iterations=2).run(QUESTION)
    assert result.answer == "" and [r.quality for r in result.rounds] == [0.5, 0.5]


def test_the_step_of_a_prompt_and_unknown_token_limits() -> None:
    llm = RecordingLLM(JsonBackend([]), {"cot": 64})
    assert llm.max_tokens == {**MAX_TOKENS, "cot": 64}
    assert llm.step("Generate step-by-step chain-of-thought reasoning ...") == "cot"
    with pytest.raises(ValueError, match=r"max_tokens steps \['plan'\]"):
        AuthorsVendiRAG(Answerer(JsonBackend([])), None, max_tokens={"plan": 8})  # type: ignore[arg-type]
