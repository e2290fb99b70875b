"""How deep a JSON body nests, measured before any parser reads it.

A parser reads nested arrays and objects by recursion: Python's ``json`` raises ``RecursionError``
somewhere past a thousand levels (where exactly depends on the stack already in use), pydantic's
parser refuses past its own limit, and a structure that does parse is walked by recursion again
when it is validated. So the guard (:mod:`ragfolio.serving.guard`) measures a body's depth first,
with :func:`json_depth`, and refuses one deeper than ``max_json_depth`` with a 400 before any
parser sees it, whatever field it sits in (one the endpoint ignores too).

The depth is the largest number of arrays and objects open at once: ``{"query": "q"}`` is 1,
``{"messages": [{"content": [{"type": "text"}]}]}`` is 4. Brackets inside strings do not count.
The scan (a regular expression removes the strings, numpy sums the brackets) takes about 30 ms for
a megabyte of short strings and microseconds for a usual request; the guard skips it when the
body holds fewer brackets than the limit. On text that is not JSON the result is only an upper
bound, which is what a limit needs: the parser then reports what is wrong with it.
"""

from __future__ import annotations

import re

import numpy as np

# A JSON string: quote, then runs of plain characters and escapes (an escaped quote does not end it).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_CHUNK = 1 << 20  # brackets summed at a time (bounds the memory of a hostile body's scan)


def json_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in the JSON text ``body`` (0: a scalar, or nothing).

    Args:
        body: The request body as received (any bytes; not decoded).

    Returns:
        The largest count of ``[`` and ``{`` open at once, outside strings.
    """
    brackets = np.frombuffer(_STRING.sub(b"", body).translate(None, _NOT_BRACKETS), dtype=np.uint8)
    depth = deepest = 0
    for start in range(0, brackets.size, _CHUNK):
        chunk = brackets[start:start + _CHUNK]
        running = np.cumsum(np.where((chunk == ord("[")) | (chunk == ord("{")), 1, -1), dtype=np.int64) + depth
        deepest, depth = max(deepest, int(running.max())), int(running[-1])
    return deepest
