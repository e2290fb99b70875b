"""One clear line for the errors a user makes: a malformed data row, a bad parameter, a run name,
a stage run before the stages that write its inputs.

A ``kedro run`` that stops on such an error prints ``error: <file>:<line>: field '<field>': <what>``
(or the parameter's name and what was expected) and exits with status 1, instead of ~250 lines of
framed traceback that bury it. Every other exception keeps its full traceback, and
``RAGFOLIO_TRACEBACK=1`` shows the traceback of these too.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from types import TracebackType
from typing import Any

from pydantic import ValidationError

from ragfolio.core.data.records import DataFormatError
from ragfolio.runs import RunNameError
from ragfolio.stage_inputs import MissingInputError

USER_ERRORS: tuple[type[BaseException], ...] = (DataFormatError, ValidationError, RunNameError, MissingInputError)
TRACEBACK_ENV = "RAGFOLIO_TRACEBACK"


def one_line(error: BaseException) -> str:
    """``error`` as one line: a data row's location and field, or each invalid parameter by name."""
    if isinstance(error, ValidationError):
        problems = []
        for item in error.errors():
            where = ".".join(str(part) for part in item["loc"]) or "<parameters>"
            got = f" (got {item['input']!r})" if item["type"] != "missing" and not isinstance(item["input"], dict) else ""
            problems.append(f"{where}: {item['msg']}{got}")
        return f"invalid parameters ({error.title}): " + "; ".join(problems)
    return " ".join(str(error).split())


def user_error(error: BaseException) -> BaseException | None:
    """The user error that ``error`` is or was raised from (``raise ... from``), if any."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, USER_ERRORS):
            return seen
        seen = seen.__cause__
    return None


def excepthook(previous: Callable[[type[BaseException], BaseException, TracebackType | None], Any]) -> Callable[..., Any]:
    """A ``sys.excepthook`` that prints user errors as one line and hands the rest to ``previous``."""

    def hook(kind: type[BaseException], error: BaseException, tb: TracebackType | None) -> Any:
        found = user_error(error)
        if found is None or os.environ.get(TRACEBACK_ENV, "").lower() in ("1", "true", "yes"):
            return previous(kind, error, tb)
        sys.stderr.write(f"error: {one_line(found)}\n(the traceback: rerun with {TRACEBACK_ENV}=1)\n")
        return None

    hook.ragfolio = True  # type: ignore[attr-defined]  # installed once, however often the hook runs
    return hook


def install_excepthook() -> None:
    """Install :func:`excepthook` over the current ``sys.excepthook`` (Kedro's rich one), once."""
    if not getattr(sys.excepthook, "ragfolio", False):
        sys.excepthook = excepthook(sys.excepthook)
