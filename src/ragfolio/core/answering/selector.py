"""How the selector picks one of the routed members' answers: its modes.

With l >= 2 every routed member's reader answers from that member's passages, and one answer is
served. The answerer's ``select_mode`` says how it is picked (:meth:`Answerer.choose
<ragfolio.core.answering.answerer.Answerer.choose>`):

- ``judge``: the LLM is shown the question and the distinct answers with their explanations, not
  the passages, and names one (one short call; the mode issue 34 measured).
- ``judge_passages``: the same judge, shown the passages the answers cite, each once and numbered,
  and which of them each answer cites (one longer call; the paper's official code offers a judge of
  this kind).
- ``confidence``: the answer whose reader was most confident, its answer's mean token
  log-probability from the reader's own call (:mod:`~ragfolio.core.answering.confidence`; no call).
- ``agreement``: the answer most routed members gave, after SQuAD normalisation; a tie goes to the
  top-routed of the tied answers (no call).
- ``agreement_confidence``: the answer most members gave; a tie goes to the most confident. Of
  the members that gave it, the most confident one's reply is served (its citations).

The modes without a call see no order, so they have no position bias; a tie falls to router order
(``agreement``) or confidence. An answer whose confidence is unknown (a backend without
log-probabilities) ranks below every known one; with none known, ``confidence`` takes the
top-routed answer. Empty answers are never picked unless every answer is empty.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragfolio.core.answer_text import normalize_answer

SELECT_MODES = ("judge", "judge_passages", "confidence", "agreement", "agreement_confidence")
"""The selector's modes (the module docstring)."""

JUDGE_MODES = ("judge", "judge_passages")
"""The modes that make an LLM call."""


def check_mode(mode: str) -> str:
    """``mode`` when it is one of :data:`SELECT_MODES`.

    Raises:
        ValueError: It is not (the message lists them).
    """
    if mode not in SELECT_MODES:
        raise ValueError(f"select_mode={mode!r} is not one of {list(SELECT_MODES)}")
    return mode


def distinct_options(candidates: Sequence[str]) -> dict[str, list[int]]:
    """The candidates' distinct non-empty answers (SQuAD normalisation), each with the indices
    that gave it, in router order of their first appearance."""
    options: dict[str, list[int]] = {}
    for i, text in enumerate(candidates):
        if norm := normalize_answer(text):
            options.setdefault(norm, []).append(i)
    return options


def _confidence(value: float | None) -> float:
    return float("-inf") if value is None else float(value)


def pick_without_call(mode: str, candidates: Sequence[str], confidences: Sequence[float | None]) -> int:
    """The index (into ``candidates``, router order) that a mode without a call picks.

    Raises:
        ValueError: ``mode`` makes a call, or the lengths differ.
    """
    if check_mode(mode) in JUDGE_MODES:
        raise ValueError(f"select_mode={mode!r} needs the judge's call")
    if len(confidences) != len(candidates):
        raise ValueError(f"{len(confidences)} confidences for {len(candidates)} candidates")
    groups = list(distinct_options(candidates).values())
    if not groups:
        return 0
    best_in = {g[0]: max(g, key=lambda i: _confidence(confidences[i])) for g in groups}
    if mode == "confidence":
        top = max(groups, key=lambda g: _confidence(confidences[best_in[g[0]]]))  # ties: router order
        return best_in[top[0]]
    most = max(len(g) for g in groups)
    tied = [g for g in groups if len(g) == most]
    if mode == "agreement":
        return tied[0][0]
    top = max(tied, key=lambda g: _confidence(confidences[best_in[g[0]]]))
    return best_in[top[0]]
