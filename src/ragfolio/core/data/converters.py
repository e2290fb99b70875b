"""Converters from the benchmarks' native files into ragfolio questions.

Each converter takes a path and returns ``list[Question]``; a malformed record raises
:class:`~ragfolio.core.data.records.DataFormatError` naming the file, the record (``line N`` for JSONL
files, ``record N`` (0-based) for files holding one JSON document) and the native field.
Every reader accepts a JSON array of records, JSON Lines (one record per line, whatever the file
extension) and the pandas column layout (``{"field": {"0": value, ...}, ...}``) some repositories
ship.

Formats:

* **HotpotQA** (Yang et al. 2018): ``{_id, question, answer, type, level, context: [[title,
  [sentence, ...]]], supporting_facts: [[title, sentence_index]]}``. A paragraph's text is its
  sentences stripped and joined by one space (HotpotQA's sentences carry their own leading space;
  this is how the rows of ``shared/data/hotpotqa.jsonl`` from the original format were built). A
  paragraph is supporting when its title appears in ``supporting_facts``.
* **2WikiMultiHopQA** (Ho et al. 2020): the HotpotQA shape plus ``evidences``; ``type`` is
  ``compositional``, ``comparison``, ``inference`` or ``bridge_comparison``.
* **MuSiQue** (Trivedi et al. 2022), JSON Lines: ``{id, question, answer, answer_aliases,
  paragraphs: [{idx, title, paragraph_text, is_supporting}]}``; ``type`` is the hop count from
  the id prefix (``"3hop1__..."`` -> ``"3hop"``); answers are ``[answer] + answer_aliases``.
* **TriviaQA**, either FlashRAG JSON Lines ``{id, question, golden_answers}`` (no contexts) or DPR
  retriever JSON ``{question, answers, positive_ctxs, negative_ctxs, hard_negative_ctxs}`` where
  positive contexts are supporting and (hard) negatives are not. DPR rows have no id; they get
  ``"<file stem>-<record index>"``.

CLI::

    python -m ragfolio.core.data.converters {hotpotqa,2wikimultihopqa,musique,triviaqa} IN OUT.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from ragfolio.core.data.records import DataFormatError, Question

logger = logging.getLogger(__name__)

Location = int | str  # a JSONL line number, or "record N" inside a single JSON document


def _read_records(path: Path) -> list[tuple[Location, Any]]:
    """Parse a JSON array, a pandas column-JSON object or JSON Lines into located records."""
    text = path.read_text(encoding="utf-8")
    stripped = text.lstrip()
    if not stripped:
        raise DataFormatError(path, 1, "<file>", "file is empty")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        if stripped[0] == "[" or err.msg != "Extra data":
            raise DataFormatError.invalid_json(path, err.lineno, err, field="<file>") from err
        doc = None  # several JSON values: JSON Lines
    if isinstance(doc, list):
        return [(f"record {i}", rec) for i, rec in enumerate(doc)]
    if isinstance(doc, dict):
        columns = list(doc.values())
        if columns and all(isinstance(c, dict) for c in columns):
            return _from_columns(path, doc)
        return [(1, doc)]  # a JSON Lines file with a single row
    if doc is not None:
        raise DataFormatError(path, 1, "<file>", f"expected records, got {type(doc).__name__}")
    records: list[tuple[Location, Any]] = []
    for lineno, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                records.append((lineno, json.loads(line)))
            except json.JSONDecodeError as err:
                raise DataFormatError.invalid_json(path, lineno, err) from err
    return records


def _from_columns(path: Path, doc: dict[str, dict[str, Any]]) -> list[tuple[Location, Any]]:
    """Turn pandas ``to_json(orient="columns")`` output back into rows, in index order."""
    index = sorted({k for col in doc.values() for k in col}, key=lambda k: (len(k), k))
    rows = [{name: col[k] for name, col in doc.items() if k in col} for k in index]
    logger.debug("%s: read %d rows from pandas column layout", path, len(rows))
    return [(f"record {i}", row) for i, row in enumerate(rows)]


def _field(path: Path, loc: Location, rec: Any, key: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(rec, dict):
        raise DataFormatError(path, loc, "<row>", f"expected an object, got {type(rec).__name__}")
    if key not in rec:
        raise DataFormatError(path, loc, key, "missing")
    value = rec[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise DataFormatError(path, loc, key, f"unexpected type {type(value).__name__}")
    return value


def _str_list(path: Path, loc: Location, values: Any, field: str) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise DataFormatError(path, loc, field, "expected a list of strings")
    return values


def _answers(values: Iterable[str]) -> list[str]:
    """Non-empty answers, exact duplicates removed, order kept."""
    return list(dict.fromkeys(v for v in values if v.strip()))


def _question(path: Path, loc: Location, record: dict[str, Any]) -> Question:
    """Validate the normalised record (a safety net behind the native checks)."""
    return Question.from_record(record, source=str(path), line=loc)


def join_sentences(sentences: Sequence[str]) -> str:
    """HotpotQA/2WikiMultiHopQA paragraph text: sentences stripped, joined by one space."""
    return " ".join(s.strip() for s in sentences if s.strip())


def _convert_wiki_style(path: str | Path, dataset: str) -> list[Question]:
    path = Path(path)
    out: list[Question] = []
    for loc, rec in _read_records(path):
        qid = str(_field(path, loc, rec, "_id", (str, int)))
        sup = _field(path, loc, rec, "supporting_facts", list) if "supporting_facts" in rec else []
        if not all(isinstance(f, list) and f and isinstance(f[0], str) for f in sup):
            raise DataFormatError(path, loc, "supporting_facts", "expected [[title, index], ...]")
        gold_titles = {f[0] for f in sup}
        contexts = []
        for i, item in enumerate(_field(path, loc, rec, "context", list)):
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)):
                raise DataFormatError(path, loc, f"context[{i}]", "expected [title, [sentences]]")
            sentences = _str_list(path, loc, item[1], f"context[{i}][1]")
            text = join_sentences(sentences)
            if text:
                contexts.append(
                    {"title": item[0], "text": text, "is_supporting": item[0] in gold_titles}
                )
        missing = gold_titles - {c["title"] for c in contexts}
        if missing:
            logger.warning("%s:%s: supporting titles not in context: %s", path, loc, missing)
        answer = _field(path, loc, rec, "answer", str) if "answer" in rec else ""
        qtype = _field(path, loc, rec, "type", str) if rec.get("type") is not None else None
        record = {
            "id": qid,
            "dataset": dataset,
            "question": _field(path, loc, rec, "question", str),
            "answers": _answers([answer]),
            "type": qtype,
            "contexts": contexts,
        }
        out.append(_question(path, loc, record))
    logger.info("converted %d %s questions from %s", len(out), dataset, path)
    return out


def convert_hotpotqa(path: str | Path) -> list[Question]:
    """Read a HotpotQA file (train/dev, distractor or fullwiki). See the module docstring."""
    return _convert_wiki_style(path, "hotpotqa")


def convert_2wikimultihopqa(path: str | Path) -> list[Question]:
    """Read a 2WikiMultiHopQA file. See the module docstring."""
    return _convert_wiki_style(path, "2wikimultihopqa")


_HOPS = re.compile(r"^(\d+hop)")


def convert_musique(path: str | Path) -> list[Question]:
    """Read a MuSiQue-Ans (or -Full) JSON Lines file. See the module docstring."""
    path = Path(path)
    out: list[Question] = []
    for loc, rec in _read_records(path):
        qid = _field(path, loc, rec, "id", str)
        aliases = rec.get("answer_aliases") or []
        aliases = _str_list(path, loc, aliases, "answer_aliases")
        answers = [_field(path, loc, rec, "answer", str), *aliases]
        contexts = []
        for i, par in enumerate(_field(path, loc, rec, "paragraphs", list)):
            where = f"paragraphs[{i}]"
            if not isinstance(par, dict):
                raise DataFormatError(path, loc, where, "expected an object")
            for key, kind in (("title", str), ("paragraph_text", str), ("is_supporting", bool)):
                if not isinstance(par.get(key), kind):
                    reason = f"missing or not {kind.__name__}"
                    raise DataFormatError(path, loc, f"{where}.{key}", reason)
            contexts.append(
                {
                    "title": par["title"],
                    "text": par["paragraph_text"],
                    "is_supporting": par["is_supporting"],
                }
            )
        hops = _HOPS.match(qid)
        record = {
            "id": qid,
            "dataset": "musique",
            "question": _field(path, loc, rec, "question", str),
            "answers": _answers(answers),
            "type": hops.group(1) if hops else None,
            "contexts": contexts,
        }
        out.append(_question(path, loc, record))
    logger.info("converted %d musique questions from %s", len(out), path)
    return out


def _dpr_contexts(path: Path, loc: Location, rec: dict[str, Any]) -> list[dict[str, Any]]:
    contexts = []
    kinds = (("positive_ctxs", True), ("negative_ctxs", False), ("hard_negative_ctxs", False))
    for key, supporting in kinds:
        for i, ctx in enumerate(rec.get(key) or []):
            if not (isinstance(ctx, dict) and isinstance(ctx.get("text"), str)):
                raise DataFormatError(path, loc, f"{key}[{i}].text", "missing or not a string")
            title = ctx.get("title") or ""
            if not isinstance(title, str):
                raise DataFormatError(path, loc, f"{key}[{i}].title", "not a string")
            if ctx["text"].strip():
                contexts.append({"title": title, "text": ctx["text"], "is_supporting": supporting})
    return contexts


def convert_triviaqa(path: str | Path) -> list[Question]:
    """Read TriviaQA in FlashRAG JSON Lines or DPR retriever JSON. See the module docstring."""
    path = Path(path)
    out: list[Question] = []
    for index, (loc, rec) in enumerate(_read_records(path)):
        question = _field(path, loc, rec, "question", str)
        if "golden_answers" in rec:  # FlashRAG
            qid = str(_field(path, loc, rec, "id", (str, int)))
            answers = _str_list(path, loc, rec["golden_answers"], "golden_answers")
            contexts: list[dict[str, Any]] = []
        else:  # DPR
            qid = str(rec["id"]) if rec.get("id") is not None else f"{path.stem}-{index}"
            answers = _str_list(path, loc, _field(path, loc, rec, "answers", list), "answers")
            contexts = _dpr_contexts(path, loc, rec)
        record = {
            "id": qid,
            "dataset": "triviaqa",
            "question": question,
            "answers": _answers(answers),
            "type": None,
            "contexts": contexts,
        }
        out.append(_question(path, loc, record))
    logger.info("converted %d triviaqa questions from %s", len(out), path)
    return out


CONVERTERS: dict[str, Callable[[str | Path], list[Question]]] = {
    "hotpotqa": convert_hotpotqa,
    "2wikimultihopqa": convert_2wikimultihopqa,
    "musique": convert_musique,
    "triviaqa": convert_triviaqa,
}


def write_jsonl(questions: Iterable[Question], path: str | Path) -> int:
    """Write questions as ragfolio JSONL (UTF-8, one object per line).

    Creates the parent folder if needed and returns the number of rows written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8") as f:
        for q in questions:
            f.write(json.dumps(q.to_record(), ensure_ascii=False) + "\n")
            n += 1
    return n


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point; returns the process exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m ragfolio.core.data.converters",
        description="Convert a benchmark's native file into ragfolio JSONL.",
    )
    parser.add_argument("benchmark", choices=sorted(CONVERTERS))
    parser.add_argument("input", type=Path, help="native file (json, jsonl)")
    parser.add_argument("output", type=Path, help="ragfolio JSONL to write")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        questions = CONVERTERS[args.benchmark](args.input)
    except (DataFormatError, OSError) as err:
        logger.error("%s", err)
        return 1
    n = write_jsonl(questions, args.output)
    logger.info("wrote %d questions to %s", n, args.output)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
