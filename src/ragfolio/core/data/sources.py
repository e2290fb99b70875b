"""Where a run's questions come from: labelled rows, questions written from the documents, or a query log.

``data_prep.questions`` names it:

* ``labelled``: question rows with supporting contexts (or gold answers), split into train, dev
  and test (:mod:`ragfolio.core.data.loading`);
* ``synthetic``: the embedded reader writes questions from the corpus's passages
  (:mod:`ragfolio.core.synthesis`); labelled rows, if any, are all test;
* ``log``: a file of a team's questions without labels (``question_synthesis.log_file``);
  relevance is judged on the pool's top passages (:mod:`ragfolio.core.synthesis.judging`);
  labelled rows, if any, are all test, except those whose text is in the log;
* ``auto`` (the default): ``labelled`` when ``raw_dir`` holds question files, ``synthetic`` when it
  holds passage files only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final, Literal

from ragfolio.core.data.loading import split_folder
from ragfolio.core.data.records import DataFormatError

Source = Literal["auto", "labelled", "synthetic", "log"]
SOURCES: Final = ("auto", "labelled", "synthetic", "log")
SYNTHETIC: Final = "synthetic"  # the dataset name of written questions
LOG: Final = "log"  # the dataset name of a query log's questions


def resolve_source(requested: str, raw_dir: str | Path) -> str:
    """The source a run uses: ``requested``, with ``auto`` resolved from ``raw_dir``'s files.

    Raises:
        ValueError: ``requested`` is unknown, or ``labelled`` for a folder of passages only (the
            message says which setting writes questions from them).
    """
    if requested not in SOURCES:
        raise ValueError(f"data_prep.questions={requested!r} must be one of {SOURCES}")
    question_files, passage_files = split_folder(raw_dir)
    if requested == "auto":
        return "labelled" if question_files else "synthetic"
    if requested == "labelled" and not question_files:
        raise ValueError(
            f"{raw_dir} holds {len(passage_files)} passage file(s) ({{\"title\", \"text\"}} per line) and no "
            "question file, so there is nothing labelled to choose retrievers on. Set "
            "data_prep.questions=synthetic (or leave it auto) and the reader writes questions from the passages, "
            "or data_prep.questions=log with question_synthesis.log_file=<your users' questions> to judge relevance "
            "for them")
    return requested


def source_of(datasets: Iterable[str]) -> str:
    """The source a run's corpora were built for: ``synthetic`` or ``log`` when their datasets name
    the written or judged questions' dataset (data_prep adds it), else ``labelled``."""
    names = set(datasets)
    return SYNTHETIC if SYNTHETIC in names else LOG if LOG in names else "labelled"


def in_log(question: str, log: Iterable[Mapping[str, str]]) -> bool:
    """Whether ``question`` (whitespace folded, any case) is one of ``log``'s (:func:`read_log`)."""
    return " ".join(question.split()).lower() in {row["question"].lower() for row in log}


def read_log(path: str | Path) -> list[dict[str, str]]:
    """A query log: ``[{"id", "question"}, ...]`` from a ``.txt`` file (one question per line) or a
    JSONL file (``{"question": str}`` per line, optional ``id``). Blank lines are skipped; a
    question repeated (same text after whitespace folding) is kept once.

    Raises:
        FileNotFoundError: The file is missing.
        DataFormatError: A JSONL row that is not an object with a non-empty string ``question``
            (its file, line and field), or a log with no question.
    """
    path = Path(path)
    rows, seen = [], set()
    with path.open(encoding="utf-8") as handle:
        for line, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            if path.suffix == ".txt":
                question, qid = raw.strip(), None
            else:
                try:
                    row = json.loads(raw)
                except json.JSONDecodeError as error:
                    raise DataFormatError.invalid_json(path, line, error) from error
                if not isinstance(row, dict) or not isinstance(row.get("question"), str) or not row["question"].strip():
                    raise DataFormatError(path, line, "question", "expected an object with a non-empty string 'question'")
                question, qid = row["question"].strip(), row.get("id")
            folded = " ".join(question.split())
            if folded.lower() in seen:
                continue
            seen.add(folded.lower())
            rows.append({"id": str(qid) if qid is not None else f"log-{line}", "question": folded})
    if not rows:
        raise DataFormatError(path, 1, "question", "the query log holds no question")
    return rows
