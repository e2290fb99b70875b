"""A corpus's metadata held column by column, so that a filter is evaluated on all rows at once.

Each metadata key (and the pseudo-fields ``id`` and ``title``) becomes one :class:`Column` of ``n`` rows.
A row's value is either a scalar, kept in the column's flat arrays, or a list (a tag list), kept in an
inverted index ``value -> rows`` and in ``(row, number)`` / ``(row, date)`` pairs for range queries. A
filter's mask over a column is a few numpy operations, whatever the number of rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.corpus.metadata_values import Token, is_number, parse_date, token
from ragfolio.core.data.metadata import validate_metadata

_NO_ROWS = np.zeros(0, dtype=np.int64)
_NO_VALUES = np.zeros(0, dtype=np.float64)


@dataclass(frozen=True)
class Column:
    """One field over ``n`` rows (read-only once built).

    Attributes:
        present: ``(n,)`` bool, the row has a value (a scalar, or a list with at least one element).
        codes: ``(n,)`` int32, the scalar's index in ``vocabulary``; -1 where the row holds no scalar.
        vocabulary: ``{token: code}`` of the scalars in ``codes`` (see ``metadata_values.token``).
        numbers: ``(n,)`` float64, the scalar when it is a number; NaN elsewhere.
        dates: ``(n,)`` float64, the scalar when it is a date string, as UTC epoch seconds; NaN elsewhere.
        list_rows: ``{token: rows}``, the sorted int64 rows whose list contains that value.
        list_numbers: ``(rows, values)`` of every number in a list (a row repeats once per number).
        list_dates: ``(rows, seconds)`` of every date string in a list.
    """

    present: npt.NDArray[np.bool_]
    codes: npt.NDArray[np.int32]
    vocabulary: dict[Token, int]
    numbers: npt.NDArray[np.float64]
    dates: npt.NDArray[np.float64]
    list_rows: dict[Token, npt.NDArray[np.int64]]
    list_numbers: tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]
    list_dates: tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]

    def __len__(self) -> int:
        return int(self.present.shape[0])

    @classmethod
    def build(cls, n: int, entries: Sequence[tuple[int, Any]]) -> Column:
        """The column of ``n`` rows holding ``entries``, ``(row, value)`` pairs of validated values."""
        present = np.zeros(n, dtype=np.bool_)
        codes = np.full(n, -1, dtype=np.int32)
        numbers = np.full(n, np.nan)
        dates = np.full(n, np.nan)
        vocabulary: dict[Token, int] = {}
        list_rows: defaultdict[Token, list[int]] = defaultdict(list)
        pairs: dict[str, tuple[list[int], list[float]]] = {"n": ([], []), "d": ([], [])}
        for row, value in entries:
            if isinstance(value, list | tuple):
                present[row] = len(value) > 0
                for element in dict.fromkeys(token(e) for e in value):  # each value once per row
                    list_rows[element].append(row)
                for element in value:
                    if is_number(element):
                        pairs["n"][0].append(row)
                        pairs["n"][1].append(float(element))
                    elif isinstance(element, str) and (seconds := parse_date(element)) is not None:
                        pairs["d"][0].append(row)
                        pairs["d"][1].append(seconds)
                continue
            present[row] = True
            codes[row] = vocabulary.setdefault(token(value), len(vocabulary))
            if is_number(value):
                numbers[row] = float(value)
            elif isinstance(value, str) and (seconds := parse_date(value)) is not None:
                dates[row] = seconds
        return cls(
            present, codes, vocabulary, numbers, dates,
            {t: np.asarray(rows, dtype=np.int64) for t, rows in list_rows.items()},
            *(_pairs(*pairs[kind]) for kind in ("n", "d")),
        )

    @classmethod
    def empty(cls, n: int) -> Column:
        """A column of ``n`` rows, none of which has a value (a key that some other rows have)."""
        return cls.build(n, ())

    def concatenated(self, other: Column) -> Column:
        """This column's rows followed by ``other``'s (whose codes are re-read into one vocabulary)."""
        offset = len(self)
        vocabulary = dict(self.vocabulary)
        recode = np.array([vocabulary.setdefault(t, len(vocabulary)) for t in other.vocabulary], dtype=np.int32)
        other_codes = np.where(other.codes >= 0, recode[np.maximum(other.codes, 0)] if recode.size else -1, -1)
        list_rows = dict(self.list_rows)
        for t, rows in other.list_rows.items():
            list_rows[t] = np.concatenate([list_rows.get(t, _NO_ROWS), rows + offset])
        return Column(
            np.concatenate([self.present, other.present]),
            np.concatenate([self.codes, other_codes.astype(np.int32)]),
            vocabulary,
            np.concatenate([self.numbers, other.numbers]),
            np.concatenate([self.dates, other.dates]),
            list_rows,
            *(
                (np.concatenate([mine[0], theirs[0] + offset]), np.concatenate([mine[1], theirs[1]]))
                for mine, theirs in ((self.list_numbers, other.list_numbers), (self.list_dates, other.list_dates))
            ),
        )


def _pairs(rows: list[int], values: list[float]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    if not rows:
        return _NO_ROWS, _NO_VALUES
    return np.asarray(rows, dtype=np.int64), np.asarray(values, dtype=np.float64)


@dataclass(frozen=True)
class MetadataColumns:
    """The metadata of ``n`` passages, one :class:`Column` per key, plus their ids and titles.

    Build with :meth:`from_rows`; :meth:`appended` gives the columns with more rows (live additions)
    and leaves this object as it was.
    """

    n: int
    fields: dict[str, Column]  # metadata keys and the pseudo-fields "id" and "title"

    @classmethod
    def from_rows(
        cls, rows: Sequence[Mapping[str, Any] | None], ids: Sequence[str], titles: Sequence[str]
    ) -> MetadataColumns:
        """Columns of ``rows`` (each row a passage's metadata, None for none).

        Raises:
            ValueError: ``ids`` or ``titles`` of another length than ``rows``, or a row that
                :func:`~ragfolio.core.data.metadata.validate_metadata` rejects (named by its index).
        """
        n = len(rows)
        if len(ids) != n or len(titles) != n:
            raise ValueError(f"rows ({n}), ids ({len(ids)}) and titles ({len(titles)}) must have one length")
        entries: defaultdict[str, list[tuple[int, Any]]] = defaultdict(list)
        for i, row in enumerate(rows):
            for key, value in (validate_metadata(row, f"metadata row {i}") if row is not None else {}).items():
                entries[key].append((i, value))
        fields = {key: Column.build(n, found) for key, found in entries.items()}
        fields["id"] = Column.build(n, list(enumerate(_strings(ids, "ids"))))
        fields["title"] = Column.build(n, list(enumerate(_strings(titles, "titles"))))
        return cls(n, fields)

    def appended(
        self, rows: Sequence[Mapping[str, Any] | None], ids: Sequence[str], titles: Sequence[str]
    ) -> MetadataColumns:
        """New columns holding these rows followed by ``rows`` (row ``len(self) + i`` is ``rows[i]``)."""
        added = MetadataColumns.from_rows(rows, ids, titles)
        fields = {
            key: self.fields.get(key, Column.empty(self.n)).concatenated(added.fields.get(key, Column.empty(added.n)))
            for key in self.fields.keys() | added.fields.keys()
        }
        return MetadataColumns(self.n + added.n, fields)

    def __len__(self) -> int:
        return self.n

    def keys(self) -> list[str]:
        """The metadata keys any row has, sorted (not the pseudo-fields ``id`` and ``title``)."""
        return sorted(key for key in self.fields if key not in ("id", "title"))

    def column(self, field: str) -> Column | None:
        """The column of a metadata key or pseudo-field; None when no row has that key."""
        return self.fields.get(field)


def _strings(values: Sequence[str], name: str) -> Sequence[str]:
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise ValueError(f"{name}[{i}] must be a string, got {type(value).__name__}")
    return values
