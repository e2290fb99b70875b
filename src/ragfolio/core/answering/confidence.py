"""The reader's own confidence in its answer, from the call that wrote it: no extra call.

:func:`answer_confidence` is the mean log-probability of the tokens that write the ``"answer"``
field's value of a JSON reply (``{"answer": "Paris", "explanation": "..."}``):

    confidence = (1 / |T|) * sum_{t in T} log p(t | tokens before t)

where ``T`` holds the generated tokens whose text overlaps the characters between the field's
quotes (a token straddling a quote counts if it holds at least one answer character; a token
whose piece is empty, one ending inside a multi-byte character, counts where it stands). The
logprobs are :attr:`~ragfolio.core.llm.chat.Completion.logprobs`, of the raw logits (before the
JSON grammar), so a forced token still shows how sure the model was of it. In ``(-inf, 0]``;
``exp`` of it is the geometric mean of the tokens' probabilities.
"""

from __future__ import annotations

from ragfolio.core.answering.prompts import _ANSWER_FIELD  # the parser's: a cut reply keeps its first characters
from ragfolio.core.llm.chat import Completion


def answer_span(text: str) -> tuple[int, int] | None:
    """``(start, end)``: where the ``"answer"`` field's string value lies in ``text``, quotes
    excluded (to the end of ``text`` for a reply cut inside it); None: no such field."""
    match = _ANSWER_FIELD.search(text)
    return None if match is None else match.span(1)


def answer_confidence(completion: Completion) -> float | None:
    """The mean logprob of the tokens of the reply's answer (see the module docstring).

    Returns:
        A float ``<= 0``; None when the completion has no logprobs, its text no ``"answer"``
        string field, or that field is empty.
    """
    if completion.logprobs is None or (span := answer_span(completion.text)) is None:
        return None
    start, end = span
    if start == end:
        return None
    scores, offset = [], 0
    for piece, score in completion.logprobs:
        after = offset + len(piece)
        if (offset < end and after > start) if piece else start <= offset < end:
            scores.append(score)
        offset = after
        if offset >= end:
            break
    return sum(scores) / len(scores) if scores else None
