"""The reader's confidence in its answer: the mean logprob of the tokens of the reply's "answer" field."""

from __future__ import annotations

import math

import pytest

from ragfolio.core.answering.confidence import answer_confidence, answer_span
from ragfolio.core.llm.chat import Completion


def reply(*scored: tuple[str, float]) -> Completion:
    """A completion of the given token pieces and logprobs (its text their join)."""
    return Completion("".join(piece for piece, _ in scored), 50, len(scored), 1.0, tuple(scored))


def test_the_mean_covers_exactly_the_tokens_of_the_answer() -> None:
    said = reply(('{"', -0.1), ("answer", -0.2), ('":"', -0.3), ("Par", -1.0), ("is", -3.0),
                 ('","', -0.4), ("used", -0.5), ('":[1],"explanation":"capital"}', -0.6))
    assert said.text == '{"answer":"Paris","used":[1],"explanation":"capital"}'
    assert answer_confidence(said) == pytest.approx(-2.0)


def test_tokens_straddling_a_quote_count_when_they_hold_an_answer_character() -> None:
    text = '{"answer": "London", "explanation": "x"}'
    said = Completion(text, 5, 4, 1.0, (('{"answer": ', -0.1), ('"Lon', -1.0), ('don",', -2.0),
                                        (' "explanation": "x"}', -9.0)))
    assert answer_confidence(said) == pytest.approx(-1.5)  # the opening and closing quote tokens hold "Lon", "don"


def test_an_empty_piece_counts_where_it_stands() -> None:
    """A token ending inside a multi-byte character has an empty piece: it counts with the character
    that follows it when that is in the answer, not when it is after it."""
    text = '{"answer":"Zürich"}'
    said = Completion(text, 5, 6, 1.0, (('{"answer":"', -0.1), ("Z", -1.0), ("", -2.0), ("ürich", -3.0),
                                        ('"}', -0.5), ("", -7.0)))
    assert answer_confidence(said) == pytest.approx(-2.0)


def test_a_reply_cut_inside_the_answer_scores_what_it_wrote() -> None:
    said = reply(('{"answer":"', -0.1), ("Louis", -0.5), (" the", -1.5))
    assert answer_span(said.text) == (11, len(said.text))
    assert answer_confidence(said) == pytest.approx(-1.0)


def test_none_without_logprobs_an_answer_field_or_an_answer() -> None:
    assert answer_confidence(Completion('{"answer":"Paris"}', 5, 3, 1.0)) is None
    assert answer_confidence(reply(("Paris", -0.2), (" is the capital", -0.3))) is None
    assert answer_confidence(reply(('{"answer":', -0.1), (" 42}", -0.3))) is None  # not a string
    assert answer_confidence(reply(('{"answer":""', -0.1), (',"explanation":"none"}', -0.3))) is None
    assert answer_confidence(Completion.none()) is None


def test_escaped_quotes_stay_inside_the_answer_and_a_key_in_a_string_is_not_the_field() -> None:
    text = '{"explanation":"says \\"answer\\": \\"no\\"","answer":"a \\"b\\""}'
    start, end = answer_span(text)
    assert text[start:end] == 'a \\"b\\"'
    said = Completion(text, 5, 2, 1.0, ((text[:start], -0.1), (text[start:], math.log(0.5))))
    assert answer_confidence(said) == pytest.approx(math.log(0.5))
