"""A completion as it is generated, from any backend (:data:`~ragfolio.core.llm.chat.TextStream`).

:func:`stream_chat` streams what ``backend.complete`` would return: a
:class:`~ragfolio.core.llm.chat.StreamingBackend` (the OpenAI-compatible client, the LLM
process's backend) streams it itself; an in-process model with ``stream_text`` (llama.cpp)
yields the pieces as it decodes (:func:`stream_prompt`); any other backend yields its whole
completion as one piece, so every backend can be streamed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from ragfolio.core.llm.chat import (
    ChatBackend,
    Completion,
    JSONSchema,
    LocalModel,
    Messages,
    StreamingBackend,
    TextStream,
)


def stream_chat(
    backend: ChatBackend, messages: Messages, *, max_tokens: int, temperature: float = 0.0,
    json_schema: JSONSchema | None = None,
) -> TextStream:
    """``backend.complete(...)``'s completion as it is generated, from any backend.

    A :class:`StreamingBackend` (:class:`OpenAICompatibleClient`, the LLM process's backend) streams
    it; an in-process model with ``stream_text`` (llama.cpp) yields its pieces as it decodes the
    prompt :meth:`LocalModel.prompt` gives, with its default stop strings, as its ``complete``
    does; any other backend yields its whole completion as one piece.
    """
    if isinstance(backend, StreamingBackend):
        return backend.stream(messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema)
    if isinstance(backend, LocalModel) and callable(getattr(backend, "stream_text", None)):
        return _local_stream(backend, messages, max_tokens, temperature, json_schema)
    return _whole(backend, messages, max_tokens, temperature, json_schema)


def in_one_piece(completion: Completion) -> TextStream:
    """A finished ``completion`` as a stream: its whole text as one piece (none when empty)."""
    if completion.text:
        yield completion.text
    return completion


def _whole(backend: ChatBackend, messages: Messages, max_tokens: int, temperature: float,
           json_schema: JSONSchema | None) -> TextStream:
    return (yield from in_one_piece(
        backend.complete(messages, max_tokens=max_tokens, temperature=temperature, json_schema=json_schema)))


def _local_stream(backend: LocalModel, messages: Messages, max_tokens: int, temperature: float,
                  json_schema: JSONSchema | None) -> TextStream:
    prompt = backend.prompt(messages)
    if prompt is None:  # the engine applies a chat template of its own: only complete() answers
        return (yield from _whole(backend, messages, max_tokens, temperature, json_schema))
    return (yield from stream_prompt(backend, prompt, max_tokens=max_tokens, temperature=temperature,
                                     stop=backend.default_stop, json_schema=json_schema))


def stream_prompt(
    backend: LocalModel, prompt: str, *, max_tokens: int, temperature: float = 0.0,
    stop: Sequence[str] | None = None, json_schema: JSONSchema | None = None,
) -> TextStream:
    """The continuation of a text prompt by an in-process model as it is decoded: the pieces of its
    ``stream_text`` (llama.cpp; the completion carries its ``logprobs``), else its whole ``generate``
    completion as one piece."""
    stream_text = getattr(backend, "stream_text", None)
    if not callable(stream_text):
        return (yield from in_one_piece(backend.generate([prompt], max_tokens=max_tokens, temperature=temperature,
                                                          stop=stop, json_schema=json_schema)[0]))
    start = time.perf_counter()
    pieces = stream_text(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop, json_schema=json_schema)
    said, generation = [], iter(pieces)
    try:
        for piece in generation:
            said.append(piece)
            yield piece
    finally:  # a stream given up on stops generating (and lets go of the model) now
        if callable(close := getattr(generation, "close", None)):
            close()
    n_prompt, n_new = pieces.counts
    return Completion("".join(said), n_prompt, n_new, (time.perf_counter() - start) * 1000.0,
                      getattr(pieces, "logprobs", None))
