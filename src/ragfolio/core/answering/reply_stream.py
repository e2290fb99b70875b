"""The reader's answer while its JSON reply is generated: decoded, then sent as soon as it is settled.

The reader replies as :data:`~ragfolio.core.answering.prompts.ANSWER_SCHEMA`,
``{"answer": "...", "explanation": "..."}``, the answer first (llama.cpp's grammar writes the
properties in the schema's order). Two steps turn the reply's pieces into the answer's:

- :class:`AnswerField` decodes the answer string as ``json.loads`` would, piece by piece: the
  escapes ``\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX`` (a surrogate pair joined into one character,
  a lone surrogate kept), an escape split across pieces (held until it is whole), any text (pieces
  are ``str``: a backend hands out whole characters). It stops at the closing quote (the
  explanation is not read). Any other reply (not an object, another key first, an invalid escape,
  a raw control character in the string) sets :attr:`AnswerField.failed`.
- :func:`settled_answer` is the part of it that the final answer (what
  :func:`~ragfolio.core.answering.prompts.parse_reply` makes of the whole reply, cleaning
  included) surely starts with, whatever the reply says next; :func:`answer_pieces` sends each new
  part of it, and at the end whatever of the final answer is left. So the pieces join to exactly
  the final answer.

What is settled, and why (``parse_reply`` cleans the answer: trims whitespace, quotes and a final
period, drops markdown ``**``/``__``, a leading bullet and an ``Answer:``-like prefix):

- nothing until the answer's first character is a letter or digit (else it may be a bullet, a
  quote or markdown) and its first words cannot be or become such a prefix (``answer``, ``a:``,
  ``the``/``final``/``short answer``): ``"The Beatles"`` waits for ``"The B"``;
- then the text so far less its **trailing run of whitespace, quotes and periods**, which cleaning
  may strip at the end (``"Washington, D.C."`` is sent as ``"Washington, D.C"`` up to the last
  ``C``, and the final ``"."`` is dropped as the non-streamed answer drops it);
- nothing past the first ``*`` or ``_`` (markdown that cleaning removes) or the first escape (a
  reply cut by ``max_tokens`` inside a later escape is read undecoded by ``parse_reply``) until
  the closing quote;
- at the closing quote, the whole answer as cleaned; for a reply that is not of that shape,
  everything at the end.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ragfolio.core.answering.prompts import _QUOTES, parse_reply
from ragfolio.core.llm.chat import Completion, TextStream

_WHITESPACE = " \t\n\r"  # JSON's
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_KEY = '"answer"'
_HEX = frozenset("0123456789abcdefABCDEF")


class AnswerField:
    """Decodes the ``"answer"`` string of a JSON reply fed to it piece by piece (:meth:`feed`).

    Attributes:
        text: The answer decoded so far (the whole answer once :attr:`closed`).
        closed: The closing quote was read.
        failed: The reply is not ``{"answer": "<string>", ...}``; :attr:`text` keeps what was
            decoded before.
        escaped_at: Length of :attr:`text` when the first escape was read (None: no escape yet);
            ``text[:escaped_at]`` is the answer exactly as the reply wrote it.
    """

    def __init__(self) -> None:
        self.text = ""
        self.closed = False
        self.failed = False
        self.escaped_at: int | None = None
        self._state = "object"  # object -> key -> colon -> value -> string
        self._pending = ""  # the key read so far, or an escape not yet whole
        self._high = ""  # a high surrogate waiting for the low one that may follow

    @property
    def as_written(self) -> str:
        """The start of :attr:`text` that the reply wrote as it is (no escape in it)."""
        return self.text if self.escaped_at is None else self.text[:self.escaped_at]

    @property
    def done(self) -> bool:
        return self.closed or self.failed

    def feed(self, piece: str) -> str:
        """Read the next piece of the reply; returns the text it added to :attr:`text`."""
        before = len(self.text)
        for char in piece:
            if self.done:
                break
            self._read(char)
        return self.text[before:]

    def _fail(self) -> None:
        self.failed = True

    def _read(self, char: str) -> None:
        state = self._state
        if state == "string":
            self._read_string(char)
        elif state == "key" and (self._pending or char not in _WHITESPACE):
            self._pending += char
            if not _KEY.startswith(self._pending):
                self._fail()
            elif self._pending == _KEY:
                self._state, self._pending = "colon", ""
        elif char in _WHITESPACE:
            return
        elif (state, char) in (("object", "{"), ("colon", ":"), ("value", '"')):
            self._state = {"object": "key", "colon": "value", "value": "string"}[state]
        else:
            self._fail()

    def _read_string(self, char: str) -> None:
        if self._pending:
            self._read_escape(char)
        elif char == "\\":
            if self.escaped_at is None:
                self.escaped_at = len(self.text)
            self._pending = char
        elif char == '"':
            self._add("")
            self.closed = True
        elif ord(char) < 0x20:  # json.loads refuses a raw control character in a string
            self._fail()
        else:
            self._add(char)

    def _read_escape(self, char: str) -> None:
        self._pending += char
        if len(self._pending) == 2 and char != "u":
            self._pending = ""
            if char in _ESCAPES:
                self._add(_ESCAPES[char])
            else:
                self._fail()
        elif len(self._pending) > 2 and char not in _HEX:
            self._fail()
        elif len(self._pending) == 6:
            code, self._pending = int(self._pending[2:], 16), ""
            self._add_code(code)

    def _add_code(self, code: int) -> None:
        if 0xDC00 <= code <= 0xDFFF and self._high:  # the low half of a pair: one character
            pair = 0x10000 + ((ord(self._high) - 0xD800) << 10) + (code - 0xDC00)
            self._high = ""
            self.text += chr(pair)
        elif 0xD800 <= code <= 0xDBFF:
            self._add("")
            self._high = chr(code)
        else:
            self._add(chr(code))

    def _add(self, text: str) -> None:
        """Append ``text``, after a high surrogate that no low one followed (kept alone, as json.loads does)."""
        self.text += self._high + text
        self._high = ""


# What cleaning may strip from the answer's end, besides whitespace.
_END_STRIPPED = frozenset(_QUOTES + ".")
# The words parse_reply's prefix rule may remove before "answer" ("The answer is ...").
_BEFORE_ANSWER = ("the", "final", "short")


def settled_answer(field: AnswerField) -> str:
    """The text the final answer starts with, whatever the reply says after what ``field`` has read
    (see the module docstring); the whole cleaned answer once ``field`` is closed."""
    if field.closed:
        return parse_reply(json.dumps({"answer": field.text})).answer
    text = field.as_written.split("*", 1)[0].split("_", 1)[0].lstrip()
    if not _start_settled(text):
        return ""
    end = len(text)
    while end and (text[end - 1].isspace() or text[end - 1] in _END_STRIPPED):
        end -= 1
    return text[:end]


def _start_settled(text: str) -> bool:
    """Whether cleaning keeps the start of ``text`` whatever follows: it starts with a letter or
    digit, and its first words are not, and cannot become, a prefix cleaning removes."""
    if not text or not text[0].isalnum():
        return False
    low = _fold(text)
    if _may_become(low, ("answer", "a:")):
        return False
    for word in _BEFORE_ANSWER:
        if word.startswith(low):
            return False
        if low.startswith(word) and low[len(word):len(word) + 1].isspace():
            rest = low[len(word):].lstrip()
            if not rest or _may_become(rest, ("answer",)):
                return False
    return True


def _may_become(text: str, words: Sequence[str]) -> bool:
    return any(text.startswith(word) or word.startswith(text) for word in words)


def _fold(text: str) -> str:
    """``text`` as a case-insensitive regex compares it (each character's lower case, and the
    dotless i and long s that it matches with i and s)."""
    return "".join(char.lower()[:1] for char in text).replace("\u0131", "i").replace("\u017f", "s")


def answer_pieces(reply: TextStream) -> TextStream:
    """The answer of a streamed reader ``reply`` as it is settled: pieces that join to
    ``parse_reply(completion.text).answer``, then the reply's :class:`Completion`.

    One piece per piece of the reply (empty when it settles nothing new, as while the explanation
    is written), so that a reader that stops reading stops the reply at its next token.

    Raises:
        RuntimeError: What was sent is not the start of the final answer (a reply that repeats its
            ``"answer"`` key; the module docstring says why nothing else can do it).
    """
    field, sent = AnswerField(), ""
    try:
        while True:
            try:
                piece = next(reply)
            except StopIteration as end:
                completion: Completion = end.value
                break
            new = ""
            if not field.done:
                field.feed(piece)
                ready = settled_answer(field)
                if len(ready) > len(sent) and ready.startswith(sent):
                    new, sent = ready[len(sent):], ready
            yield new
    finally:
        reply.close()
    final = parse_reply(completion.text).answer
    if not final.startswith(sent):
        raise RuntimeError(f"streamed the answer {sent!r}, but the whole reply's answer is {final!r}")
    if final != sent:
        yield final[len(sent):]
    return completion
