import hashlib
import json
import logging
import shutil
from pathlib import Path

import pytest

from ragfolio.core.data.corpora import Corpora
from ragfolio.core.data.records import DataFormatError, Question
from ragfolio.pipelines.data_prep.nodes import build_corpora, load_questions


def test_split_without_test_dir_is_seeded_per_dataset(tiny_dir) -> None:
    params = {"raw_dir": str(tiny_dir), "test_fraction": 0.3, "seed": 1}
    first, again = load_questions(params), load_questions(params)
    assert first == again
    for dataset in ("hotpotqa", "musique"):
        splits = {r["split"] for r in first if r["dataset"] == dataset}
        assert splits == {"train", "test"}


def test_dev_is_carved_from_train_seeded_and_leaves_test_where_it_was(tiny_dir) -> None:
    base = {"raw_dir": str(tiny_dir), "test_fraction": 0.3, "seed": 1}
    plain, with_dev = load_questions(base), load_questions({**base, "dev_fraction": 0.25})
    assert with_dev == load_questions({**base, "dev_fraction": 0.25})

    def ids(records: list[dict], split: str) -> set[str]:
        return {r["id"] for r in records if r["split"] == split}

    assert ids(with_dev, "test") == ids(plain, "test")  # test does not move
    assert ids(with_dev, "train") | ids(with_dev, "dev") == ids(plain, "train")
    for dataset in ("hotpotqa", "musique"):  # every dataset gives dev at least one of its train questions
        assert {r["split"] for r in with_dev if r["dataset"] == dataset} == {"train", "dev", "test"}
    with pytest.raises(ValueError, match="dev_fraction"):
        load_questions({**base, "dev_fraction": 1.0})


def test_dataset_without_contexts_is_logged_and_left_out(tiny_dir, tmp_path, caplog) -> None:
    raw = tmp_path / "raw"
    shutil.copytree(tiny_dir, raw)
    shutil.copy(tiny_dir.parent / "tiny_triviaqa" / "triviaqa.jsonl", raw)
    for mode in ("union", "per_dataset"):
        caplog.clear()
        params = {"raw_dir": str(raw), "corpus": mode}
        with caplog.at_level(logging.WARNING):
            corpora = build_corpora(load_questions(params), params)
        assert set(corpora.datasets) == {"hotpotqa", "musique"}
        assert "triviaqa" in caplog.text and "left out of retrieval metrics" in caplog.text


def test_test_dir_makes_every_raw_row_train(tiny_dir, tmp_path) -> None:
    test = tmp_path / "test"
    test.mkdir()
    rows = (tiny_dir / "hotpotqa.jsonl").read_text().splitlines()
    (test / "extra.jsonl").write_text(rows[0].replace('"id": "', '"id": "copy-', 1) + "\n")
    records = load_questions({"raw_dir": str(tiny_dir), "test_dir": str(test)})
    assert [r["id"] for r in records if r["split"] == "test"] == ["copy-" + json.loads(rows[0])["id"]]
    assert sum(r["split"] == "train" for r in records) == 14


def test_same_id_in_raw_and_test_dir_is_an_error(tiny_dir) -> None:
    with pytest.raises(ValueError, match="both raw_dir and test_dir"):
        load_questions({"raw_dir": str(tiny_dir), "test_dir": str(tiny_dir)})


def test_parameter_typo_fails_with_its_name(tiny_dir) -> None:
    with pytest.raises(ValueError, match="test_fractoin"):
        load_questions({"raw_dir": str(tiny_dir), "test_fractoin": 0.2})


# --- the corpora -------------------------------------------------------------------------------

PARAGRAPH = {"title": "Shared page", "text": "First sentence.  Second sentence."}  # older HotpotQA spacing


def _question(qid: str, dataset: str, text: str) -> dict:
    contexts = [{**PARAGRAPH, "text": text, "is_supporting": True},
                {"title": f"Distractor {qid}", "text": f"Unrelated text of {qid}.", "is_supporting": False}]
    return {"id": qid, "dataset": dataset, "question": f"What does {qid} ask?", "answers": ["x"], "type": None,
            "contexts": contexts}


def _write_raw(folder: Path) -> Path:
    """Two datasets of two questions; one paragraph double-spaced in one, single-spaced in the other."""
    folder.mkdir()
    rows = {"hotpotqa": [_question("h1", "hotpotqa", PARAGRAPH["text"]), _question("h2", "hotpotqa", "Only here.")],
            "wiki": [_question("w1", "wiki", "First sentence. Second sentence."), _question("w2", "wiki", "Also.")]}
    for dataset, records in rows.items():
        (folder / f"{dataset}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder


def _corpora(raw: Path, **params: object) -> tuple[list[dict], Corpora]:
    p = {"raw_dir": str(raw), "test_fraction": 0.5, "seed": 0, **params}
    questions = load_questions(p)
    return questions, build_corpora(questions, p)


def test_union_is_the_default_and_one_passage_per_paragraph_up_to_spacing(tmp_path) -> None:
    questions, corpora = _corpora(_write_raw(tmp_path / "raw"))
    assert corpora.mode == "union" and corpora.datasets == {"hotpotqa": "union", "wiki": "union"}
    corpus = corpora.corpus_for("wiki")
    assert list(corpora.corpora) == ["union"]
    assert len(corpus) == 1 + 4 + 2  # the shared paragraph, 4 distractors, 2 other gold paragraphs
    assert sum(" ".join(text.split()) == "First sentence. Second sentence." for text in corpus.texts) == 1
    rows = corpus.row_of()
    by_id = {r["id"]: Question.from_record(r) for r in questions}
    shared = {rows[by_id[qid].gold_passage_ids()[0]] for qid in ("h1", "w1")}
    assert len(shared) == 1 and corpus.texts[shared.pop()] == PARAGRAPH["text"]  # the first copy, as it was
    # train and test questions are pooled: every question's gold passages are in the corpus
    assert {r["split"] for r in questions} == {"train", "test"}
    assert all(g in rows for q in by_id.values() for g in q.gold_passage_ids())


def test_corpus_dir_passages_are_added_once(tmp_path) -> None:
    passages = tmp_path / "passages"
    passages.mkdir()
    lines = [{"title": "Extra", "text": "A passage no question shows."},
             {"title": "Shared page", "text": "First sentence. Second sentence.", "id": "kept?"},  # a context: keeps its content id
             {"title": "Extra", "text": "A passage  no question shows."}]
    (passages / "more.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    (passages / "notes.txt").write_text("not a passage file")
    raw = _write_raw(tmp_path / "raw")
    _, without = _corpora(raw)
    _, corpora = _corpora(raw, corpus_dir=str(passages))
    corpus = corpora.corpus_for("hotpotqa")
    assert len(corpus) == len(without.corpus_for("hotpotqa")) + 1
    assert corpus.titles[-1] == "Extra" and corpus.texts[-1] == "A passage no question shows."
    assert corpus.fingerprint != without.corpus_for("hotpotqa").fingerprint


def test_passage_ids_and_metadata_reach_the_saved_corpora(tmp_path) -> None:
    passages = tmp_path / "passages"
    passages.mkdir()
    lines = [{"title": "Extra", "text": "A passage no question shows.", "id": "doc-7", "metadata": {"year": 2021}},
             {"title": "Shared page", "text": "First sentence. Second sentence.", "id": "doc-8",
              "metadata": {"tags": ["shared"]}}]
    (passages / "more.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    raw = _write_raw(tmp_path / "raw")
    _, without = _corpora(raw)
    _, corpora = _corpora(raw, corpus_dir=str(passages))
    records = json.loads(json.dumps(corpora.to_dict()))["corpora"]["union"]
    assert records[-1] == {"id": "doc-7", "title": "Extra", "text": "A passage no question shows.",
                           "metadata": {"year": 2021}}
    shared = [r for r in records if r.get("metadata") == {"tags": ["shared"]}]
    assert len(shared) == 1 and shared[0]["id"].startswith("p")  # the context's row keeps its content id
    assert [r["id"] for r in records[:-1]] == list(without.corpus_for("wiki").ids)
    assert Corpora.from_dict(corpora.to_dict()) == corpora


def test_malformed_corpus_dir_line_names_file_and_line(tmp_path) -> None:
    passages = tmp_path / "passages"
    passages.mkdir()
    (passages / "a.jsonl").write_text('{"title": "T", "text": "fine"}\n')
    (passages / "b.jsonl").write_text('{"title": "T", "text": "fine"}\n\n{"title": "T", "text": 3}\n')
    raw = _write_raw(tmp_path / "raw")
    with pytest.raises(DataFormatError, match=r"b\.jsonl:3: field 'text': expected a string"):
        _corpora(raw, corpus_dir=str(passages))
    (passages / "b.jsonl").write_text('{"title": "T", "text": "fine"}\nnot json\n')
    with pytest.raises(DataFormatError, match=r"b\.jsonl:2: field '<row>': invalid JSON"):
        _corpora(raw, corpus_dir=str(passages))
    with pytest.raises(ValueError, match="corpus_dir=.* only read with corpus: union"):
        _corpora(raw, corpus="per_dataset", corpus_dir=str(passages))
    with pytest.raises(ValueError, match="corpus"):
        _corpora(raw, corpus="pooled")


def _old_per_dataset(questions: list[dict]) -> dict[str, list[tuple[str, str]]]:
    """The corpora data_prep built before ``corpus: union``: exact (title, text), in id order."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for r in sorted(questions, key=lambda r: r["id"]):
        for c in r["contexts"]:
            key = hashlib.sha1(f"{c['title']}\n{c['text']}".encode()).hexdigest()
            out.setdefault(r["dataset"], {}).setdefault(key, (c["title"], c["text"]))
    return {d: list(passages.values()) for d, passages in sorted(out.items())}


def test_per_dataset_keeps_each_datasets_own_corpus(tiny_dir) -> None:
    questions, corpora = _corpora(tiny_dir, corpus="per_dataset")
    assert corpora.mode == "per_dataset" and corpora.datasets == {"hotpotqa": "hotpotqa", "musique": "musique"}
    for dataset, passages in _old_per_dataset(questions).items():
        corpus = corpora.corpus_for(dataset)
        assert list(zip(corpus.titles, corpus.texts, strict=True)) == passages
    # union: the same passages, every dataset's after the one before (the fixtures share none)
    _, union = _corpora(tiny_dir)
    expected = [p for passages in _old_per_dataset(questions).values() for p in passages]
    assert list(zip(union.corpus_for("musique").titles, union.corpus_for("musique").texts, strict=True)) == expected
