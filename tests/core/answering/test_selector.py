"""The selector's modes: the judge with or without passages, the readers' confidence, agreement."""

from __future__ import annotations

import json
import typing

import pytest

from ragfolio.core.answering.answerer import Answer, Answerer
from ragfolio.core.answering.selector import SELECT_MODES, pick_without_call
from ragfolio.core.llm.chat import Completion
from ragfolio.serving.answering_config import AnswererConfig

BEN = ("Big Ben", "Big Ben is the bell of the clock at Westminster.")
PARIS = ("Paris", "Paris is the capital of France.")
LYON = ("Lyon", "Lyon is on the Rhône.")


class Judge:
    """Names candidate ``choice`` in every reply and keeps each prompt."""

    def __init__(self, choice: int = 1) -> None:
        self.choice, self.prompts = choice, []

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        self.prompts.append(messages[0]["content"])
        return Completion(json.dumps({"choice": self.choice}), 30, 4, 1.0)


def said(text: str, confidence: float | None = None, used: tuple[int, ...] = (0,), explanation="evidence") -> Answer:
    return Answer(text, explanation, True, Completion.none(), used, False, confidence)


@pytest.mark.parametrize(
    ("mode", "texts", "confidences", "picked"),
    [
        ("confidence", ["Paris", "Lyon"], [-0.9, -0.1], 1),
        ("confidence", ["Paris", "Lyon"], [-0.5, -0.5], 0),  # a tie goes to router order
        ("confidence", ["Paris", "Lyon"], [None, -3.0], 1),  # an unknown confidence ranks below any known
        ("confidence", ["Paris", "Lyon"], [None, None], 0),
        ("confidence", ["", "Lyon"], [-0.01, -2.0], 1),  # an empty answer is never picked
        ("agreement", ["Lyon", "Paris", "paris."], [-0.1, -2.0, -3.0], 1),  # two say Paris: the first of them
        ("agreement", ["Lyon", "Paris"], [-2.0, -0.1], 0),  # a tie: the top-routed
        ("agreement_confidence", ["Lyon", "Paris"], [-2.0, -0.1], 1),  # a tie: the more confident
        ("agreement_confidence", ["Lyon", "Paris", "the Paris"], [-0.1, -2.0, -0.5], 2),  # most, then its surest reader
        ("agreement", ["", ""], [None, None], 0),
    ],
)
def test_the_modes_without_a_call_pick_by_their_signal(mode, texts, confidences, picked) -> None:
    assert pick_without_call(mode, texts, confidences) == picked


def test_the_modes_without_a_call_make_none_and_see_no_order() -> None:
    judge = Judge()
    answerer = Answerer(judge, select_mode="confidence")
    answers = [said("Paris", -0.9), said("Lyon", -0.2)]
    chosen = answerer.choose("Where?", answers, [[PARIS], [LYON]])
    assert (chosen.index, chosen.answer, chosen.mode, chosen.position) == (1, "Lyon", "confidence", None)
    assert chosen.completion == Completion.none() and not judge.prompts
    reversed_ = answerer.choose("Where?", answers[::-1], [[LYON], [PARIS]])
    assert reversed_.answer == "Lyon"  # the same answer whichever order the members came in


def test_the_judge_sees_explanations_and_the_passage_judge_sees_the_cited_passages() -> None:
    answers = [said("Paris", -0.5, used=(1,)), said("Lyon", -0.4, used=(0, 1))]
    passages = [[BEN, PARIS], [LYON, PARIS]]
    plain = Judge(choice=2)
    chosen = Answerer(plain, select_mode="judge", shuffle_candidates=False).choose("Where?", answers, passages)
    assert chosen.answer == "Lyon" and chosen.position == 2 and chosen.mode == "judge"
    assert "explanation: evidence" in plain.prompts[0] and "Passages" not in plain.prompts[0]
    with_passages = Judge(choice=1)
    chosen = Answerer(with_passages, select_mode="judge_passages", shuffle_candidates=False).choose(
        "Where?", answers, passages)
    assert chosen.answer == "Paris" and chosen.mode == "judge_passages"
    prompt = with_passages.prompts[0]
    # each cited passage once, numbered in the order first cited; Big Ben, cited by no one, is not shown
    assert "[1] Paris: Paris is the capital" in prompt and "[2] Lyon: Lyon is on" in prompt and "Big Ben" not in prompt
    assert "1. Paris (cites: [1])" in prompt and "2. Lyon (cites: [2], [1])" in prompt


def test_one_distinct_answer_needs_no_judge() -> None:
    judge = Judge()
    for mode in SELECT_MODES:
        chosen = Answerer(judge, select_mode=mode).choose("Q?", [said("Paris"), said("the Paris.")], [[PARIS], [PARIS]])
        assert chosen.index == 0 and chosen.completion == Completion.none()
    assert not judge.prompts


def test_a_mode_is_checked_where_it_is_set() -> None:
    with pytest.raises(ValueError, match="select_mode='vote'"):
        Answerer(Judge(), select_mode="vote")
    with pytest.raises(ValueError, match="needs the judge"):
        pick_without_call("judge", ["a", "b"], [None, None])
    with pytest.raises(ValueError, match="2 confidences for 1"):
        pick_without_call("confidence", ["a"], [None, None])
    with pytest.raises(ValueError, match="1 passage lists for 2 answers"):
        Answerer(Judge()).choose("Q?", [said("a"), said("b")], [[PARIS]])
    # the service's setting lists the same modes
    literal = typing.get_args(AnswererConfig.model_fields["select_mode"].annotation)[0]
    assert typing.get_args(literal) == SELECT_MODES
