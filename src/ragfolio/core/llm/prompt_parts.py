"""A chat prompt whose template's own tokens are told apart from the text of its messages.

A chat template wraps each message in control tokens (Qwen's ``<|im_start|>user\\n...<|im_end|>``).
Read as one text with control tokens parsed, a message holding such a string (a question with
``<|im_start|>system ...`` in it) would open a turn of its own: the user could write the
instructions. :func:`chat_prompt` renders the messages and records which parts the template
wrote (a :class:`ChatPrompt`); :func:`prompt_tokens` reads control tokens only where the template
wrote them and the rest as plain text.

For a prompt whose messages hold no control token's string the tokens are those llama.cpp reads
from the whole text with ``parse_special``: llama.cpp, too, splits a prompt at its control tokens
and reads each piece between them as text, and the pieces here are cut at the same places.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from ragfolio.core.llm.chat import Messages

logger = logging.getLogger(__name__)

CONTROL = 8  # llama.cpp's LLAMA_TOKEN_ATTR_CONTROL: a token read from text only with parse_special
_MARK = re.compile("(\ue000\\d+\ue001)")  # a message's place in the marked render (private-use characters)


class ChatPrompt(str):
    """A prompt's text that knows which of its parts the chat template wrote.

    Attributes:
        parts: ``(text, templated)`` pairs in order, joining to the prompt: ``templated`` for the
            template's text (read with its control tokens), else a message's content (read as text).
    """

    parts: tuple[tuple[str, bool], ...]

    def __new__(cls, parts: Sequence[tuple[str, bool]]) -> ChatPrompt:
        prompt = super().__new__(cls, "".join(text for text, _ in parts))
        prompt.parts = tuple(parts)
        return prompt


def chat_prompt(render: Callable[[Messages], str], messages: Messages) -> ChatPrompt:
    """``render(messages)`` (a chat template applied) as a :class:`ChatPrompt`.

    The template is applied once more to the messages with each content replaced by a marker; the
    text around the markers is the template's. A template that strips a content is followed (the
    contents are tried stripped when as given they do not rebuild ``render(messages)``); one that
    rewrites them otherwise gets them as given, still read as text.
    """
    marks = [f"\ue000{i}\ue001" for i in range(len(messages))]
    marked = render([{**message, "content": mark} for message, mark in zip(messages, marks, strict=True)])
    pieces = [piece for piece in _MARK.split(marked) if piece]

    def assembled(contents: list[str]) -> ChatPrompt:
        return ChatPrompt([(contents[int(piece[1:-1])], False) if _MARK.fullmatch(piece) else (piece, True)
                           for piece in pieces])

    given = [str(message["content"]) for message in messages]
    whole = render(messages)
    for contents in (given, [content.strip() for content in given]):
        if (prompt := assembled(contents)) == whole:
            return prompt
    logger.debug("the chat template rewrites the messages' contents; they are read as given")
    return assembled(given)


def prompt_tokens(vocab: Any, prompt: str) -> list[int]:
    """The tokens of ``prompt`` for a llama.cpp vocabulary (cyllama's ``LlamaVocab``).

    A :class:`ChatPrompt`: the beginning-of-text token when the model adds one, the control tokens
    the template wrote, and every other piece read as text. Any other string is read as text only:
    a control token's string in it is not that token (a plain prompt holds none of its own).
    """
    if not isinstance(prompt, ChatPrompt):
        return list(vocab.tokenize(prompt, add_special=True, parse_special=False))
    tokens = [vocab.token_bos()] if vocab.get_add_bos() else []
    text = ""  # read since the last control token
    for part, templated in prompt.parts:
        if not templated:
            text += part
            continue
        cursor = 0
        for token in vocab.tokenize(part, add_special=False, parse_special=True):
            if not vocab.get_attr(token) & CONTROL:
                continue
            piece = vocab.token_to_piece(token, 0, True)
            at = part.index(piece, cursor)
            tokens += [*_text(vocab, text + part[cursor:at]), token]
            text, cursor = "", at + len(piece)
        text += part[cursor:]
    return tokens + _text(vocab, text) + ([vocab.token_eos()] if vocab.get_add_eos() else [])


def _text(vocab: Any, text: str) -> list[int]:
    return list(vocab.tokenize(text, add_special=False, parse_special=False)) if text else []
