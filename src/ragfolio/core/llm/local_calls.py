"""The LLM server's calls to its in-process model: in batches, or one at a time as it generates.

:func:`answer_calls` answers a batch of calls (:mod:`ragfolio.core.llm.server` gathers concurrent
requests into it): one ``generate`` per group of equal settings and similar length.
:func:`stream_call` answers one call piece by piece (a ``stream: true`` request).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ragfolio.core.llm.chat import Completion, LLMRequestError, LocalModel, Messages, TextStream
from ragfolio.core.llm.text_streams import in_one_piece, stream_prompt


@dataclass(frozen=True)
class Call:
    """One request to answer: a text ``prompt``, or chat ``messages`` rendered by the backend."""

    prompt: str | None
    messages: Messages | None
    max_tokens: int
    temperature: float
    stop: tuple[str, ...] | None
    json_schema: str | None = None  # the schema's canonical JSON (hashable), when the reply must be JSON


@dataclass(frozen=True)
class Outcome:
    """A call's completion, or why the backend refused it (a 400)."""

    completion: Completion | None
    refusal: str | None = None


# A batch pads every prompt to its longest, and padding costs as much as prompt tokens; so prompts
# are batched only with others at most this much longer (the answerer's short selector prompts
# apart from its answer prompts, which hold passages).
MAX_LENGTH_RATIO = 1.5


def answer_calls(backend: LocalModel, calls: list[Call]) -> list[Outcome]:
    """Answer a batch of calls: one ``generate`` per group of equal settings and similar length.

    Chat calls whose model has an engine-side chat template (no text prompt) are completed one
    by one. A refused group is retried call by call, so one over-long prompt fails alone.
    """
    out: dict[int, Outcome] = {}
    groups: dict[tuple[int, float, tuple[str, ...] | None, str | None], list[tuple[int, str]]] = {}
    for i, call in enumerate(calls):
        prompt, stop = _prompt(backend, call)
        if prompt is None:  # the engine applies a chat template of its own
            try:
                out[i] = Outcome(backend.complete(call.messages or [], max_tokens=call.max_tokens,
                                                  temperature=call.temperature, json_schema=_schema(call)))
            except LLMRequestError as exc:
                out[i] = Outcome(None, str(exc))
            continue
        groups.setdefault((call.max_tokens, call.temperature, stop, call.json_schema), []).append((i, prompt))
    batches = [(key, part) for key, members in groups.items() for part in _by_length(members)]
    for (max_tokens, temperature, stop, schema), members in batches:
        settings: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "stop": stop,
                                    "json_schema": None if schema is None else json.loads(schema)}
        prompts = [prompt for _, prompt in members]
        try:
            outcomes = [Outcome(c) for c in backend.generate(prompts, **settings)]
        except LLMRequestError as exc:
            outcomes = ([_generate_one(backend, p, settings) for p in prompts] if len(prompts) > 1
                        else [Outcome(None, str(exc))])
        out.update((i, outcome) for (i, _), outcome in zip(members, outcomes, strict=True))
    return [out[i] for i in range(len(calls))]


def _prompt(backend: LocalModel, call: Call) -> tuple[str | None, tuple[str, ...] | None]:
    """The call's text prompt (None: only ``complete`` can answer its messages) and stop strings."""
    if call.messages is None:
        return call.prompt, call.stop
    return backend.prompt(call.messages), call.stop or _tuple(backend.default_stop)


def stream_call(backend: LocalModel, call: Call) -> TextStream:
    """One call's completion as it is generated (:func:`~ragfolio.core.llm.text_streams.stream_prompt`):
    what :func:`answer_calls` would answer, piece by piece."""
    prompt, stop = _prompt(backend, call)
    if prompt is None:  # the engine applies a chat template of its own: only complete() answers
        return (yield from in_one_piece(backend.complete(call.messages or [], max_tokens=call.max_tokens,
                                                         temperature=call.temperature, json_schema=_schema(call))))
    return (yield from stream_prompt(backend, prompt, max_tokens=call.max_tokens, temperature=call.temperature,
                                     stop=stop, json_schema=_schema(call)))


def _by_length(members: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """``members`` (index, prompt) in runs of similar length: each at most :data:`MAX_LENGTH_RATIO`
    times its shortest (characters stand in for tokens)."""
    runs: list[list[tuple[int, str]]] = []
    for member in sorted(members, key=lambda m: len(m[1])):
        if runs and len(member[1]) <= MAX_LENGTH_RATIO * max(len(runs[-1][0][1]), 1):
            runs[-1].append(member)
        else:
            runs.append([member])
    return runs


def _generate_one(backend: LocalModel, prompt: str, settings: dict[str, Any]) -> Outcome:
    try:
        return Outcome(backend.generate([prompt], **settings)[0])
    except LLMRequestError as exc:
        return Outcome(None, str(exc))


def _schema(call: Call) -> dict[str, Any] | None:
    return None if call.json_schema is None else dict(json.loads(call.json_schema))


def _tuple(stop: list[str] | None) -> tuple[str, ...] | None:
    return tuple(stop) if stop else None
