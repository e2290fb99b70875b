"""question_synthesis's node: labelled questions pass through; written ones come from a scripted
OpenAI-compatible server over real HTTP, split into train, dev and (without labelled questions) test."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest
from local_http import send_json, serving
from synthesis_corpus import PASSAGES, write_passage_folder

from ragfolio.core.cache import ArrayCache
from ragfolio.core.synthesis.store import RecordStore
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions
from ragfolio.pipelines.question_synthesis.nodes import synthesize_questions


def _first_title(prompt: str) -> str:
    return prompt.split("[1] ", 1)[1].split(":", 1)[0]


class _Writer(BaseHTTPRequestHandler):
    """Writes "Which archive entry has the code <crc of the first title>?" answered by that title; answers from passages with the
    first passage's title, closed-book with "guess"."""

    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).seen.append({"path": self.path, **body})
        prompt = body["messages"][-1]["content"]
        if prompt.startswith("Passage"):
            title = _first_title(prompt)
            code = zlib.crc32(title.encode())  # a question that does not hold its answer
            reply = {"question": f"Which archive entry has the code {code}?", "answer": title}
        elif prompt.startswith("Answer the question using only the passages"):
            reply = {"answer": _first_title(prompt), "explanation": "evidence", "used": [1]}
        else:
            reply = {"answer": "guess", "explanation": "guess"}
        send_json(self, json.dumps({"choices": [{"message": {"role": "assistant", "content": json.dumps(reply)}}],
                                    "usage": {"prompt_tokens": 30, "completion_tokens": 10}}).encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def writer_server() -> Iterator[type[_Writer]]:
    with serving(type("Handler", (_Writer,), {"seen": []})) as handler:
        yield handler


def _params(url: str, **extra: Any) -> dict[str, Any]:
    return {"num_questions": 10, "progress": False, "seed": 0,
            "llm": {"kind": "openai", "openai": {"base_url": url, "model": "fake", "max_retries": 0}}, **extra}


def _run(raw_dir: Path, store: RecordStore, params: dict[str, Any], **data_prep: Any):  # type: ignore[no-untyped-def]
    prep = {"raw_dir": str(raw_dir), "seed": 0, **data_prep}
    labelled = load_questions(prep)
    cache = ArrayCache(raw_dir.parent / "cache")
    return labelled, *synthesize_questions(labelled, build_corpora(labelled, prep), store, cache, params)


def test_labelled_questions_pass_through_unchanged(tiny_dir: Path) -> None:
    closed = {"kind": "openai", "openai": {"base_url": "http://127.0.0.1:9/v1", "model": "none", "max_retries": 0}}
    labelled, questions, report = _run(tiny_dir, RecordStore(None), {"llm": closed}, dev_fraction=0.2)
    assert questions is labelled
    counts = {s: sum(q["split"] == s for q in labelled) for s in ("train", "dev", "test")}
    assert report == {"source": "labelled", "test": "labelled", "questions": counts}


def test_passages_only_give_written_train_dev_and_a_synthetic_test(tmp_path: Path, writer_server) -> None:
    store = RecordStore(tmp_path / "store.jsonl")
    labelled, questions, report = _run(write_passage_folder(tmp_path / "docs"), store, _params(writer_server.url))
    assert labelled == [] and len(questions) == 10
    assert {q["dataset"] for q in questions} == {"synthetic"} and all(q["synthetic"]["seed"] for q in questions)
    assert report["source"] == "synthetic" and report["test"] == "synthetic"
    assert report["questions"] == {"train": 6, "dev": 2, "test": 2}
    assert {q["split"] for q in questions} == {"train", "dev", "test"}
    written = report["written"]
    assert (written["tried"], written["kept"], written["reused"], written["calls"]) == (10, 10, 0, 30)
    assert written["kept_share"] == 1.0 and sum(written["dropped"].values()) == 0
    assert sum(report["kinds"].values()) == 10 and set(report["kinds"]) == {"single", "bridge", "comparison"}
    assert set(report["links"]) <= {"single", "title", "neighbour"} and report["copied_trigram_share"]["max"] < 0.5
    assert report["per_minute"]["kept"] > 0 and report["wall_s"] >= 0
    titles = {t for t, _ in PASSAGES}
    for q in questions:  # the support is the seed's passages, from the corpus
        assert all(c["is_supporting"] and c["title"] in titles for c in q["contexts"])
        assert len(q["contexts"]) == (1 if q["type"] == "single" else 2)
    assert {s["path"] for s in writer_server.seen} == {"/v1/chat/completions"}
    assert all("response_format" in s for s in writer_server.seen)  # the writer's and the reader's JSON, constrained

    calls = len(writer_server.seen)  # the same run again: read back from the store, no call
    _, again, rereport = _run(tmp_path / "docs", RecordStore(tmp_path / "store.jsonl"), _params(writer_server.url))
    assert again == questions and len(writer_server.seen) == calls and rereport["written"]["reused"] == 10


def test_labelled_questions_beside_written_ones_are_the_test(tmp_path: Path, tiny_dir: Path, writer_server) -> None:
    folder = write_passage_folder(tmp_path / "mixed")
    for path in tiny_dir.glob("*.jsonl"):
        (folder / path.name).write_bytes(path.read_bytes())
    labelled, questions, report = _run(folder, RecordStore(None), _params(writer_server.url), questions="synthetic")
    assert len(labelled) == 14 and report["test"] == "labelled" and report["source"] == "synthetic"
    test = [q for q in questions if q["split"] == "test"]
    assert [q["id"] for q in test] == [q["id"] for q in labelled]  # every labelled question, and nothing else, is test
    assert {q["dataset"] for q in questions if q["split"] != "test"} == {"synthetic"}
    assert report["questions"] == {"train": 8, "dev": 2, "test": 14}


def test_too_few_kept_questions_say_what_to_do(tmp_path: Path, writer_server) -> None:
    with pytest.raises(ValueError, match="only 2 usable question"):
        _run(write_passage_folder(tmp_path / "docs"), RecordStore(None), _params(writer_server.url, num_questions=2))
