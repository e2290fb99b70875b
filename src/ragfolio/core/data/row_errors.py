"""Every bad row of a read in one error, so that a user fixes a file in one pass.

A reader collects one :class:`~ragfolio.core.data.records.DataFormatError` per bad row and calls
:func:`raise_collected` when it has read everything: one bad row is raised as it is, several as one
:class:`DataFormatErrors` that lists the first :data:`MAX_LISTED` of them (file, line, field, reason)
and counts the rest.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragfolio.core.data.records import DataFormatError

MAX_LISTED = 20


class DataFormatErrors(DataFormatError):
    """Several bad rows of a read, as one line: ``N bad rows: <row>; <row>; ...; and M more``.

    ``path``, ``line``, ``field`` and ``reason`` are the first bad row's, so code that reads one
    :class:`~ragfolio.core.data.records.DataFormatError` still finds where to start.

    Attributes:
        errors: Every bad row's error, in reading order (all of them, not only those listed).
    """

    def __init__(self, errors: Sequence[DataFormatError]) -> None:
        if len(errors) < 2:
            raise ValueError(f"DataFormatErrors holds >= 2 errors, got {len(errors)}")
        first = errors[0]
        super().__init__(first.path, first.line, first.field, first.reason)
        self.errors = tuple(errors)
        listed = [str(error) for error in self.errors[:MAX_LISTED]]
        more = len(self.errors) - len(listed)
        self.args = (f"{len(self.errors)} bad rows: " + "; ".join(listed) + (f"; and {more} more" if more else ""),)


def raise_collected(errors: Sequence[DataFormatError]) -> None:
    """Raise nothing for no error, the error itself for one, a :class:`DataFormatErrors` for several."""
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise DataFormatErrors(errors)
