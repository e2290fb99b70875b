"""Token logprobs: read from llama.cpp's logits as a model generates, and written in OpenAI's shapes.

:func:`token_logprob` is a generated token's log-probability, ``logits[token] - logsumexp(logits)``
of the raw logits of its step (before any grammar, temperature or sampler);
:func:`token_pieces` pairs each with the token's piece of the completion's text
(:attr:`~ragfolio.core.llm.chat.Completion.logprobs`). :func:`openai_logprobs` writes them as an
OpenAI choice's ``logprobs`` (the LLM server's replies); the client reads that back
(:class:`~ragfolio.core.llm.chat.OpenAICompatibleClient`).

Cost: cyllama 0.2.18 hands the logits over as a Python list, one float per vocabulary entry
(151,936 for Qwen2.5): with the log-softmax in numpy, 4.5 ms a generated token on 2 busy cores,
where generating the token takes 65-130 ms; the greedy replies stay the same::

    .venv/bin/python benchmarks/bench_logprobs.py --questions 3 --repeats 5 --tokens 48
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragfolio.core.llm.chat import TokenLogprobs


@functools.cache
def logits_model_type() -> type:
    """cyllama's ``LlamaModel`` with the ``n_vocab`` that its ``LlamaContext.get_logits_ith`` reads
    (cyllama 0.2.18's model lacks it: a context of a plain ``LlamaModel`` cannot hand out logits)."""
    import cyllama.llama.llama_cpp as cy

    class Model(cy.LlamaModel):
        @functools.cached_property
        def n_vocab(self) -> int:
            return int(self.get_vocab().n_vocab)

    return Model


def token_logprob(ctx: Any, token: int) -> float:
    """``log softmax(logits)[token]`` of a llama.cpp context's last decoded position (raw logits,
    natural log); the context's model must be a :func:`logits_model_type`."""
    logits = np.fromiter(ctx.get_logits_ith(-1), np.float32)  # exp of float32: a third of float64's time
    top = logits.max()
    return float(logits[token] - top - np.log(np.exp(logits - top).sum(dtype=np.float64)))


def token_pieces(text: str, ends: Sequence[int], scores: Sequence[float]) -> TokenLogprobs:
    """Each token's piece of ``text`` with its logprob: the characters from the previous token's
    end to its own (``ends``, cut at ``len(text)``); the last piece runs to the end of ``text``,
    so the pieces join to it.

    Args:
        text: The completion's text (cut at a stop string).
        ends: ``(n_tokens,)`` the length of the text decoded once each token was read (a token
            that ends inside a character repeats the length before it: its piece is ``""``).
        scores: ``(n_tokens,)`` each token's logprob.
    """
    pieces: list[tuple[str, float]] = []
    start = 0
    for i, (end, score) in enumerate(zip(ends, scores, strict=True)):
        stop = len(text) if i == len(ends) - 1 else min(max(end, start), len(text))
        pieces.append((text[start:stop], score))
        start = stop
    return tuple(pieces)


def openai_logprobs(logprobs: TokenLogprobs | None, chat: bool) -> dict[str, Any] | None:
    """An OpenAI choice's ``logprobs``: ``{"content": [{"token", "logprob", "bytes", "top_logprobs"}]}``
    for the chat API, the legacy ``{"tokens", "token_logprobs", "top_logprobs", "text_offset"}``
    for the completions API (no alternatives: ``top_logprobs`` empty, or null); None: none recorded."""
    if logprobs is None:
        return None
    if chat:
        return {"content": [{"token": token, "logprob": score, "bytes": list(token.encode("utf-8")),
                             "top_logprobs": []} for token, score in logprobs]}
    offsets = np.cumsum([0, *(len(token) for token, _ in logprobs)])[:-1]
    return {"tokens": [token for token, _ in logprobs], "token_logprobs": [score for _, score in logprobs],
            "top_logprobs": None, "text_offset": [int(o) for o in offsets]}
