"""Tests for ragfolio.core.data.loading: reading and validating JSONL files and folders, splits."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from records import row

from ragfolio.core.data.loading import load_folder, load_jsonl, split_train_dev, split_train_test
from ragfolio.core.data.records import Context, DataFormatError, Question

ROOT = Path(__file__).resolve().parents[3]
FIXTURES = ROOT / "tests" / "fixtures"




def write(path: Path, rows: list[Any]) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# --- loading good rows -------------------------------------------------------------------------


def test_good_rows_load_with_extra_keys_and_blank_lines(tmp_path: Path) -> None:
    rows = [row("q1", split="dev", sources=["x"]), "", row("q2", type=None)]
    path = write(tmp_path / "toy.jsonl", rows)
    qs = load_jsonl(path)
    assert [q.id for q in qs] == ["q1", "q2"]
    q = qs[0]
    assert q.answers == ("yes", "Yes indeed")
    assert q.contexts[0] == Context("A", "Alpha text.", True)
    assert q.has_contexts and qs[1].type is None


def test_empty_answers_and_contexts_are_allowed(tmp_path: Path) -> None:
    (q,) = load_jsonl(write(tmp_path / "t.jsonl", [row(answers=[], contexts=[])]))
    assert q.answers == () and not q.has_contexts and q.gold_passage_ids() == ()


# --- malformed rows ----------------------------------------------------------------------------


def assert_names(err: DataFormatError, path: Path, line: int, field: str) -> None:
    msg = str(err)
    assert msg.startswith(f"{path}:{line}: field '{field}': "), msg
    assert (err.path, err.line, err.field) == (str(path), line, field)


def test_bad_json_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.jsonl", [row("q1"), '{"id": "q2", "dataset": '])
    with pytest.raises(DataFormatError) as info:
        load_jsonl(path)
    assert_names(info.value, path, 2, "<row>")
    assert "invalid JSON" in str(info.value)


def test_non_object_row(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.jsonl", ["[1, 2]"])
    with pytest.raises(DataFormatError) as info:
        load_jsonl(path)
    assert_names(info.value, path, 1, "<row>")


@pytest.mark.parametrize("field", ["id", "dataset", "question", "answers", "type", "contexts"])
def test_missing_field(tmp_path: Path, field: str) -> None:
    bad = row("q2")
    del bad[field]
    path = write(tmp_path / "bad.jsonl", [row("q1"), "", bad])
    with pytest.raises(DataFormatError) as info:
        load_jsonl(path)
    assert_names(info.value, path, 3, field)
    assert "missing" in str(info.value)


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"id": 7}, "id"),
        ({"id": ""}, "id"),
        ({"dataset": None}, "dataset"),
        ({"question": "  "}, "question"),
        ({"answers": "yes"}, "answers"),
        ({"answers": ["yes", 3]}, "answers[1]"),
        ({"answers": [""]}, "answers[0]"),
        ({"type": 2}, "type"),
        ({"contexts": {"title": "A"}}, "contexts"),
        ({"contexts": ["text"]}, "contexts[0]"),
        ({"contexts": [{"text": "t", "is_supporting": True}]}, "contexts[0].title"),
        ({"contexts": [{"title": 1, "text": "t", "is_supporting": True}]}, "contexts[0].title"),
        ({"contexts": [{"title": "A", "text": "", "is_supporting": True}]}, "contexts[0].text"),
        (
            {"contexts": [{"title": "A", "text": "t", "is_supporting": False},
                          {"title": "B", "text": "u", "is_supporting": "yes"}]},
            "contexts[1].is_supporting",
        ),
        ({"contexts": [{"title": "A", "text": "t", "is_supporting": 1}]}, "contexts[0].is_supporting"),
    ],
)
def test_wrong_type(tmp_path: Path, over: dict[str, Any], field: str) -> None:
    path = write(tmp_path / "bad.jsonl", [row("q1"), row("q2", **over)])
    with pytest.raises(DataFormatError) as info:
        load_jsonl(path)
    assert_names(info.value, path, 2, field)


def test_duplicate_id_names_both_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "dup.jsonl", [row("q1"), row("q2"), row("q1")])
    with pytest.raises(DataFormatError) as info:
        load_jsonl(path)
    assert_names(info.value, path, 3, "id")
    assert "first on line 1" in str(info.value)


# --- splits ------------------------------------------------------------------------------------


def questions(n_a: int, n_b: int) -> list[Question]:
    qs = [Question.from_record(row(f"a{i}", "alpha")) for i in range(n_a)]
    return qs + [Question.from_record(row(f"b{i}", "beta")) for i in range(n_b)]


def test_split_is_deterministic_partition_with_every_dataset_on_both_sides() -> None:
    qs = questions(20, 3)
    train, test = split_train_test(qs, 0.25, seed=7)
    assert (train, test) == split_train_test(qs, 0.25, seed=7)
    assert sorted(q.id for q in train + test) == sorted(q.id for q in qs)
    assert not {q.id for q in train} & {q.id for q in test}
    for ds in ("alpha", "beta"):
        assert any(q.dataset == ds for q in train) and any(q.dataset == ds for q in test)
    assert sum(q.dataset == "alpha" for q in test) == 5  # round(20 * 0.25)
    assert sum(q.dataset == "beta" for q in test) == 1  # round(0.75) -> 1, kept >= 1
    # outputs keep the input order
    assert [q.id for q in train] == [q.id for q in qs if q in train]


def test_split_depends_on_seed_not_on_input_order() -> None:
    qs = questions(30, 10)
    _, test = split_train_test(qs, 0.3, seed=1)
    _, test_rev = split_train_test(list(reversed(qs)), 0.3, seed=1)
    assert {q.id for q in test} == {q.id for q in test_rev}
    _, other = split_train_test(qs, 0.3, seed=2)
    assert {q.id for q in other} != {q.id for q in test}
    # a dataset's split does not change when another dataset is added
    _, alone = split_train_test(questions(30, 0), 0.3, seed=1)
    assert {q.id for q in alone} == {q.id for q in test if q.dataset == "alpha"}


@pytest.mark.parametrize("fraction", [0.0, 1.0, -0.1, 1.5])
def test_split_rejects_bad_fraction(fraction: float) -> None:
    with pytest.raises(ValueError, match="test_fraction"):
        split_train_test(questions(5, 5), fraction, seed=0)


def test_split_rejects_a_dataset_too_small_to_split() -> None:
    with pytest.raises(ValueError, match="'beta' has 1"):
        split_train_test(questions(5, 1), 0.5, seed=0)


# --- folders -----------------------------------------------------------------------------------


def test_load_folder_reads_top_level_jsonl_sorted_and_ignores_the_rest(tmp_path: Path) -> None:
    write(tmp_path / "b.jsonl", [row("b1", "beta")])
    write(tmp_path / "a.jsonl", [row("a1", "alpha"), row("a2", "alpha")])
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub" / "c.jsonl", [row("c1")])
    write(tmp_path / "notes.json", [row("n1")])
    (tmp_path / "README.txt").write_text("not data")
    assert [q.id for q in load_folder(tmp_path)] == ["a1", "a2", "b1"]


def test_load_folder_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_folder(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    write(tmp_path / "empty" / "x.json", [row()])
    with pytest.raises(FileNotFoundError, match="no \\*.jsonl"):
        load_folder(tmp_path / "empty")
    file = write(tmp_path / "f.jsonl", [row()])
    with pytest.raises(NotADirectoryError):
        load_folder(file)


def test_load_folder_rejects_an_id_repeated_across_files(tmp_path: Path) -> None:
    write(tmp_path / "a.jsonl", [row("q1")])
    write(tmp_path / "b.jsonl", [row("q0"), row("q1")])
    with pytest.raises(DataFormatError) as info:
        load_folder(tmp_path)
    assert_names(info.value, tmp_path / "b.jsonl", 2, "id")
    assert f"{tmp_path / 'a.jsonl'}:1" in str(info.value)


# --- bundled data ------------------------------------------------------------------------------


def test_tiny_fixtures_load() -> None:
    qs = load_folder(FIXTURES / "tiny")
    assert [sum(q.dataset == d for q in qs) for d in ("hotpotqa", "musique")] == [8, 6]
    assert all(1 <= len(q.gold_passage_ids()) <= len(q.contexts) <= 4 for q in qs)
    trivia = load_folder(FIXTURES / "tiny_triviaqa")
    assert len(trivia) == 5 and not any(q.has_contexts for q in trivia)
    assert all(q.answers for q in trivia)


def test_bundled_sample_loads() -> None:
    folder = ROOT / "data" / "01_raw"
    if not any(folder.glob("*.jsonl")):
        pytest.skip("bundled sample not present")
    qs = load_folder(folder)
    sizes = {d: sum(q.dataset == d for q in qs) for d in ("hotpotqa", "2wikimultihopqa", "musique")}
    assert sizes == {"hotpotqa": 100, "2wikimultihopqa": 100, "musique": 100}
    assert all(q.gold_passage_ids() for q in qs)


def test_split_train_dev_is_seeded_per_dataset_and_zero_means_none() -> None:
    qs = questions(20, 10)
    train, dev = split_train_dev(qs, 0.2, seed=3)
    assert (train, dev) == split_train_dev(qs, 0.2, seed=3)
    assert {q.id for q in dev} == {q.id for q in split_train_dev(list(reversed(qs)), 0.2, seed=3)[1]}
    assert sorted(q.id for q in train + dev) == sorted(q.id for q in qs)
    assert sum(q.dataset == "alpha" for q in dev) == 4 and sum(q.dataset == "beta" for q in dev) == 2
    assert {q.id for q in dev} != {q.id for q in split_train_test(qs, 0.2, seed=3)[1]}  # a stream of its own
    assert split_train_dev(qs, 0.0, seed=3) == (qs, [])
    with pytest.raises(ValueError, match="dev_fraction=1.0"):
        split_train_dev(qs, 1.0, seed=3)
