"""The free checks on a written question (copying, answer in its passages) and the answer match."""

from __future__ import annotations

import pytest

from ragfolio.core.synthesis.checks import answer_in_passages, answers_match, copied_share

QUILL = ("Quill Sensor", "The Quill Sensor measures the turbidity of river water every ten seconds. It was launched "
         "in 2003 and weighs 310 grams.")


def test_a_question_that_copies_its_passage_scores_one_and_a_paraphrase_zero() -> None:
    assert copied_share("The Quill Sensor measures the turbidity of river water every ten seconds?", [QUILL]) == 1.0
    # words: quill sensor measures turbidity of river water how often -> 7 trigrams, the last 2 new
    assert copied_share("The Quill Sensor measures the turbidity of river water how often?", [QUILL]) == pytest.approx(5 / 7)
    assert copied_share("How frequently does Larkspur's murkiness probe take a reading?", [QUILL]) == 0.0


def test_copied_share_reads_texts_not_titles_and_is_zero_below_n_words() -> None:
    assert copied_share("Quill Sensor launch year", [("Quill Sensor launch year", "It came out in 2003.")]) == 0.0
    assert copied_share("Quill Sensor?", [QUILL]) == 0.0  # two words: no trigram
    two = [("A", "first passage about rivers"), ("B", "second passage about floods")]
    assert copied_share("passage about rivers or second passage about floods", two) == 0.5  # 3 of its 6 trigrams, from both passages
    assert copied_share("about rivers", two, n=2) == 1.0


def test_answer_in_passages_is_whole_words_in_title_or_text_and_yes_no_always() -> None:
    assert answer_in_passages("310 grams", [QUILL])
    assert answer_in_passages("the quill sensor", [QUILL])  # normalised, and the title counts
    assert not answer_in_passages("2004", [QUILL])
    assert not answer_in_passages("gram", [QUILL])  # whole words only
    assert answer_in_passages("2003", [("Other", "nothing here"), QUILL])  # any passage
    for answer in ("yes", "No.", " YES "):
        assert answer_in_passages(answer, [("Other", "nothing here")])


def test_answers_match_by_exact_match_or_token_f1() -> None:
    assert answers_match("The Quill Sensor.", "quill sensor", min_f1=1.0)  # exact after normalisation
    # "quill sensor 2" against "quill sensor": precision 2/3, recall 1, F1 0.8
    assert answers_match("Quill Sensor 2", "Quill Sensor", min_f1=0.8)
    assert not answers_match("Quill Sensor 2", "Quill Sensor", min_f1=0.81)
    assert not answers_match("guess", "Quill Sensor", min_f1=0.5)


def test_an_answer_sharing_no_token_never_matches_even_at_min_f1_zero() -> None:
    """At min_f1 = 0 every closed-book answer matched, so every question was dropped as answered closed-book."""
    assert not answers_match("guess", "1996", min_f1=0.0)
    assert answers_match("in 1996", "1996", min_f1=0.0)
    assert answers_match("", "", min_f1=0.0)  # exact match of two empty answers
