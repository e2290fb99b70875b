"""Reading folders of ragfolio JSONL files (questions, passages), and splitting questions into train and test.

:func:`load_jsonl` reads one file and :func:`load_folder` every ``*.jsonl`` file of a folder; both
validate each row with :meth:`~ragfolio.core.data.records.Question.from_record` (the format is described
in :mod:`ragfolio.core.data.records`), reject repeated ids and raise
:class:`~ragfolio.core.data.records.DataFormatError` naming the file, the line and the field. They read
on past a bad row: every bad row of the files is reported in one error
(:mod:`ragfolio.core.data.row_errors`), and a last line cut short (no newline, not JSON) is said to
look truncated.
:func:`load_passage_folder` reads passage-only files (``{"title", "text"}`` per line, optional
``id`` and ``metadata``) that extend the retrieval corpus. :func:`split_train_test` holds out a seeded fraction of each dataset for test,
:func:`split_train_dev` one of its train questions for dev.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ragfolio.core.data.passages import PassageRow, parse_metadata
from ragfolio.core.data.records import DataFormatError, Question
from ragfolio.core.data.row_errors import raise_collected

logger = logging.getLogger(__name__)


def _parse_json(raw: str, path: Path, lineno: int) -> Any:
    """One JSONL line's value; a last line without its newline that is not JSON is said to look truncated."""
    try:
        return json.loads(raw)
    except json.JSONDecodeError as err:
        raise DataFormatError.invalid_json(path, lineno, err, truncated=not raw.endswith("\n")) from err


def _load_with_lines(path: Path, errors: list[DataFormatError]) -> list[tuple[int, Question]]:
    """``(line, question)`` of each valid row of ``path``; each bad row's error is appended to ``errors``."""
    rows: list[tuple[int, Question]] = []
    first_line: dict[str, int] = {}
    with path.open(encoding="utf-8") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                q = Question.from_record(_parse_json(raw, path, lineno), source=str(path), line=lineno)
                if q.id in first_line:
                    raise DataFormatError(
                        path, lineno, "id", f"duplicate id {q.id!r} (first on line {first_line[q.id]})"
                    )
            except DataFormatError as err:
                errors.append(err)
                continue
            first_line[q.id] = lineno
            rows.append((lineno, q))
    return rows


def load_jsonl(path: str | Path) -> list[Question]:
    """Read and validate one JSONL file of questions (blank lines are skipped).

    Raises:
        FileNotFoundError: If ``path`` does not exist.
        DataFormatError: If a row is invalid (bad JSON, missing or mistyped field, duplicate id),
            naming the file, line and field; several bad rows raise one
            :class:`~ragfolio.core.data.row_errors.DataFormatErrors` that lists them.
    """
    path = Path(path)
    errors: list[DataFormatError] = []
    questions = [q for _, q in _load_with_lines(path, errors)]
    raise_collected(errors)
    logger.debug("read %d questions from %s", len(questions), path)
    return questions


def load_folder(folder: str | Path) -> list[Question]:
    """Read every top-level ``*.jsonl`` file of a folder, in file-name order.

    Subfolders and files with other extensions are ignored. Ids must be unique across files.

    Raises:
        FileNotFoundError: If the folder is missing or holds no ``*.jsonl`` file.
        NotADirectoryError: If ``folder`` is a file.
        DataFormatError: On invalid rows or ids repeated across files, all of the folder's in one
            error (see :func:`load_jsonl`).
    """
    files = _jsonl_files(folder)
    questions = load_question_files(files)
    logger.info("read %d questions from %d files in %s", len(questions), len(files), folder)
    return questions


def _jsonl_files(folder: str | Path) -> list[Path]:
    """The top-level ``*.jsonl`` files of ``folder``, in name order; at least one."""
    folder = Path(folder)
    if not folder.exists():
        raise FileNotFoundError(f"data folder {folder} does not exist")
    if not folder.is_dir():
        raise NotADirectoryError(f"data folder {folder} is not a directory")
    files = sorted(p for p in folder.glob("*.jsonl") if p.is_file())
    if not files:
        raise FileNotFoundError(f"data folder {folder} holds no *.jsonl file")
    return files


def file_kind(path: str | Path) -> str:
    """``"questions"`` or ``"passages"``: what a JSONL file holds, read from its first non-blank row.

    A row with a ``question`` key is a question; one with ``text`` and no ``question`` is a passage
    (``{"title", "text"}``, optional ``id`` and ``metadata``). A file whose first row is neither
    (or not JSON) counts as questions, so reading it reports the row's errors as a question file's.
    """
    with Path(path).open(encoding="utf-8") as handle:
        for raw in handle:
            if raw.strip():
                try:
                    row = json.loads(raw)
                except json.JSONDecodeError:
                    return "questions"
                return "passages" if isinstance(row, dict) and "text" in row and "question" not in row else "questions"
    return "questions"


def split_folder(folder: str | Path) -> tuple[list[Path], list[Path]]:
    """``(question files, passage files)`` of a folder's top-level ``*.jsonl`` files (:func:`file_kind`).

    Raises:
        FileNotFoundError: If the folder is missing or holds no ``*.jsonl`` file.
        NotADirectoryError: If ``folder`` is a file.
    """
    files = _jsonl_files(folder)
    kinds = {path: file_kind(path) for path in files}
    return [p for p in files if kinds[p] == "questions"], [p for p in files if kinds[p] == "passages"]


def load_question_files(files: Sequence[Path]) -> list[Question]:
    """The questions of ``files``, as :func:`load_folder` reads a folder's (ids unique across them)."""
    questions: list[Question] = []
    where: dict[str, str] = {}
    errors: list[DataFormatError] = []
    for path in files:
        found: list[DataFormatError] = []
        for lineno, q in _load_with_lines(path, found):
            if q.id in where:
                found.append(DataFormatError(path, lineno, "id", f"duplicate id {q.id!r} (first at {where[q.id]})"))
                continue
            where[q.id] = f"{path}:{lineno}"
            questions.append(q)
        errors += sorted(found, key=lambda error: int(error.line))  # a file's errors in line order
    raise_collected(errors)
    return questions


def load_passage_files(files: Sequence[Path]) -> list[PassageRow]:
    """The passages of ``files`` in order (see :func:`load_passage_file`), every bad line in one error."""
    errors: list[DataFormatError] = []
    passages = [passage for path in files for passage in _read_passages(path, errors)]
    raise_collected(errors)
    return passages


def _parse_passage(raw: str, path: Path, lineno: int) -> PassageRow:
    record = _parse_json(raw, path, lineno)
    if not isinstance(record, dict):
        raise DataFormatError(path, lineno, "<row>", f"expected a JSON object, got {type(record).__name__}")
    for key in ("title", "text"):
        if key not in record:
            raise DataFormatError(path, lineno, key, "missing")
        if not isinstance(record[key], str):
            raise DataFormatError(path, lineno, key, f"expected a string, got {type(record[key]).__name__}")
    if not record["text"].strip():
        raise DataFormatError(path, lineno, "text", "must be a non-empty string")
    pid = record.get("id")
    if pid is not None and (not isinstance(pid, str) or not pid.strip()):
        reason = "must be a non-empty string" if isinstance(pid, str) else f"expected a string, got {type(pid).__name__}"
        raise DataFormatError(path, lineno, "id", reason)
    metadata = parse_metadata(record.get("metadata"), path, lineno)
    return PassageRow(record["title"], record["text"], pid, metadata, source=str(path), line=lineno)


def load_passage_file(path: str | Path) -> list[PassageRow]:
    """The passages of a passage file, one :class:`~ragfolio.core.data.records.PassageRow` per line.

    A line is ``{"title": str, "text": str}`` with an optional ``id`` (a non-empty string, the
    passage's corpus id, see :func:`~ragfolio.core.data.records.build_corpus`) and optional
    ``metadata`` (an object, see :mod:`~ragfolio.core.data.metadata`); ``null`` counts as absent
    for both. The title may be empty, the text may not; other keys are ignored. Blank lines are skipped.

    Raises:
        DataFormatError: On invalid lines, all of them in one error (see :func:`load_jsonl`), naming
            the file, the line and the field of each (``metadata.year`` for a bad metadata value).
    """
    errors: list[DataFormatError] = []
    passages = _read_passages(Path(path), errors)
    raise_collected(errors)
    return passages


def _read_passages(path: Path, errors: list[DataFormatError]) -> list[PassageRow]:
    """The passage of each valid line of ``path``; each bad line's error is appended to ``errors``."""
    passages = []
    with path.open(encoding="utf-8") as handle:
        for lineno, raw in enumerate(handle, start=1):
            if raw.strip():
                try:
                    passages.append(_parse_passage(raw, path, lineno))
                except DataFormatError as err:
                    errors.append(err)
    return passages


def load_passage_folder(folder: str | Path) -> list[PassageRow]:
    """The passages of every top-level ``*.jsonl`` file of ``folder``, files in name order.

    Raises:
        FileNotFoundError: If the folder is missing or holds no ``*.jsonl`` file.
        NotADirectoryError: If ``folder`` is a file.
        DataFormatError: On invalid lines, all of the folder's in one error (see :func:`load_passage_file`).
    """
    files = _jsonl_files(folder)
    passages = load_passage_files(files)
    logger.info("read %d passages from %d files in %s", len(passages), len(files), folder)
    return passages


def _dataset_seed(seed: int, dataset: str) -> list[int]:
    # A per-dataset stream (not Python's salted hash) so a dataset's split does not change
    # when other datasets are added or removed.
    return [seed, int.from_bytes(hashlib.sha1(dataset.encode()).digest()[:4], "little")]


def split_train_test(
    questions: Sequence[Question], test_fraction: float, seed: int
) -> tuple[list[Question], list[Question]]:
    """Seeded train/test split, done separately for each dataset.

    Each dataset with ``n`` questions contributes ``round(n * test_fraction)`` test questions,
    clipped to ``[1, n - 1]`` so every dataset has both train and test questions. The choice
    depends only on ``seed``, the dataset name and the set of ids (not on input order); both
    outputs keep the input order.

    Args:
        questions: Questions of one or more datasets, ids unique.
        test_fraction: Fraction of each dataset held out, ``0 < test_fraction < 1``.
        seed: Random seed.

    Returns:
        ``(train, test)``.

    Raises:
        ValueError: If ``test_fraction`` is out of range or a dataset has fewer than 2 questions.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction={test_fraction} must be in (0, 1)")
    train, test = _hold_out(questions, test_fraction, lambda dataset: _dataset_seed(seed, dataset))
    logger.info("split %d questions into %d train / %d test", len(questions), len(train), len(test))
    return train, test


def split_train_dev(
    train: Sequence[Question], dev_fraction: float, seed: int
) -> tuple[list[Question], list[Question]]:
    """Carve a seeded dev split out of the train questions, separately for each dataset.

    Dev questions decide what is chosen during development (defaults, router selection, target
    checks), so that test questions are read only by the reports. Each dataset with ``n`` train
    questions gives ``round(n * dev_fraction)`` of them, clipped to ``[1, n - 1]``; ``0`` gives no
    dev split. The draw has its own stream (the seed, ``"dev"`` and the dataset name), so it depends
    only on those and the set of ids, and the test split does not move when ``dev_fraction`` does.

    Args:
        train: The train questions of one or more datasets (the first output of :func:`split_train_test`).
        dev_fraction: Fraction of each dataset's train questions moved to dev, ``0 <= dev_fraction < 1``.
        seed: Random seed.

    Returns:
        ``(train, dev)``, each in input order.

    Raises:
        ValueError: ``dev_fraction`` is out of range, or it is positive and a dataset has fewer
            than 2 train questions.
    """
    if not 0.0 <= dev_fraction < 1.0:
        raise ValueError(f"dev_fraction={dev_fraction} must be in [0, 1)")
    if dev_fraction == 0.0:
        return list(train), []
    kept, dev = _hold_out(train, dev_fraction, lambda dataset: _dataset_seed(seed, f"dev:{dataset}"))
    logger.info("carved %d dev questions out of %d train", len(dev), len(train))
    return kept, dev


def _hold_out(
    questions: Sequence[Question], fraction: float, stream: Callable[[str], list[int]]
) -> tuple[list[Question], list[Question]]:
    """``(kept, held out)``: ``round(n * fraction)`` of each dataset's n questions, clipped to
    ``[1, n - 1]``, drawn by a permutation of its sorted ids from ``stream(dataset)``."""
    by_dataset: dict[str, list[str]] = {}
    for q in questions:
        by_dataset.setdefault(q.dataset, []).append(q.id)
    held: set[tuple[str, str]] = set()
    for dataset, ids in sorted(by_dataset.items()):
        n = len(ids)
        if n < 2:
            raise ValueError(f"dataset {dataset!r} has {n} question(s); need >= 2 to split")
        n_held = min(max(round(n * fraction), 1), n - 1)
        order = np.random.default_rng(stream(dataset)).permutation(n)
        ordered = sorted(ids)
        held.update((dataset, ordered[i]) for i in order[:n_held])
    kept = [q for q in questions if (q.dataset, q.id) not in held]
    return kept, [q for q in questions if (q.dataset, q.id) in held]
