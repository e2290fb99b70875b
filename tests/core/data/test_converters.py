"""Tests for ragfolio.core.data.converters: each benchmark's native format -> Question."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ragfolio.core.data.converters import (
    convert_2wikimultihopqa,
    convert_hotpotqa,
    convert_musique,
    convert_triviaqa,
    join_sentences,
    main,
    write_jsonl,
)
from ragfolio.core.data.loading import load_jsonl
from ragfolio.core.data.records import Context, DataFormatError, Question

# Real sentences (HotpotQA dev, via AdelWang/MIGRES data/hotpot.json) and the paragraph text the
# shared normalised file holds for them: sentences stripped and joined by one space.
STEVE_SMITH = [
    'Steven Bruce "Steve" Smith (born August 21, 1954) is an American drummer best known as a member '
    'of the rock band Journey, rejoining the group for the third time in 2015. "',
    'Modern Drummer" magazine readers have voted him the #1 All-Around Drummer five years in a row.',
    " In 2001, the publication named Smith one of the Top 25 Drummers of All Time, and in 2002 he was "
    "voted into the Modern Drummer Hall of Fame.",
    " He was inducted into the Rock and Roll Hall of Fame as a member of Journey on April 7, 2017.",
]
STEVE_SMITH_TEXT = (
    'Steven Bruce "Steve" Smith (born August 21, 1954) is an American drummer best known as a member '
    'of the rock band Journey, rejoining the group for the third time in 2015. " Modern Drummer" '
    "magazine readers have voted him the #1 All-Around Drummer five years in a row. In 2001, the "
    "publication named Smith one of the Top 25 Drummers of All Time, and in 2002 he was voted into "
    "the Modern Drummer Hall of Fame. He was inducted into the Rock and Roll Hall of Fame as a member "
    "of Journey on April 7, 2017."
)


def hotpot_record(qid: str = "5a7f6fd75542992e7d278cfa") -> dict[str, Any]:
    return {
        "_id": qid,
        "answer": "Rush",
        "question": 'Which Canadian rock band released a song called "Counterparts"?',
        "supporting_facts": [["Nobody's Hero", 0], ["Neil Peart", 1], ["Neil Peart", 0]],
        "context": [
            ["Steve Smith (musician)", STEVE_SMITH],
            ["Neil Peart", ["Neil Ellwood Peart is a Canadian musician.", " He is known for stamina."]],
            ["Nobody's Hero", ['"Nobody\'s Hero" is a song by Rush.']],
        ],
        "type": "bridge",
        "level": "hard",
    }


HOTPOT_EXPECTED = Question(
    id="5a7f6fd75542992e7d278cfa",
    dataset="hotpotqa",
    question='Which Canadian rock band released a song called "Counterparts"?',
    answers=("Rush",),
    type="bridge",
    contexts=(
        Context("Steve Smith (musician)", STEVE_SMITH_TEXT, False),
        Context("Neil Peart", "Neil Ellwood Peart is a Canadian musician. He is known for stamina.", True),
        Context("Nobody's Hero", '"Nobody\'s Hero" is a song by Rush.', True),
    ),
)


def dump(path: Path, doc: Any, *, lines: bool = False) -> Path:
    if lines:
        path.write_text("".join(json.dumps(r) + "\n" for r in doc), encoding="utf-8")
    else:
        path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_join_sentences_matches_the_shared_normalisation() -> None:
    assert join_sentences(STEVE_SMITH) == STEVE_SMITH_TEXT
    assert join_sentences(["Born (23 August 1946  – 1978).", " ", "He drummed."]) == (
        "Born (23 August 1946  – 1978). He drummed."
    )


def test_hotpotqa_json_array(tmp_path: Path) -> None:
    (q,) = convert_hotpotqa(dump(tmp_path / "hotpot_dev.json", [hotpot_record()]))
    assert q == HOTPOT_EXPECTED
    assert len(q.gold_passage_ids()) == 2


def test_hotpotqa_jsonl_and_pandas_columns_layouts(tmp_path: Path) -> None:
    recs = [hotpot_record("a"), hotpot_record("b")]
    from_lines = convert_hotpotqa(dump(tmp_path / "hotpot.json", recs, lines=True))
    columns = {key: {str(i): r[key] for i, r in enumerate(recs)} for key in recs[0]}
    from_columns = convert_hotpotqa(dump(tmp_path / "sampled_ds.json", columns))
    assert [q.id for q in from_lines] == ["a", "b"]
    assert from_lines == from_columns
    assert from_lines[0].contexts == HOTPOT_EXPECTED.contexts


def test_hotpotqa_without_answer_or_type(tmp_path: Path) -> None:
    rec = hotpot_record()
    del rec["answer"], rec["type"], rec["supporting_facts"]
    (q,) = convert_hotpotqa(dump(tmp_path / "test.json", [rec]))
    assert q.answers == () and q.type is None and q.gold_passage_ids() == ()


def test_2wikimultihopqa(tmp_path: Path) -> None:
    rec = {
        "_id": "b088d3ca08e211ebbda4ac1f6bf848b6",
        "type": "compositional",
        "question": "Where was the director of film Forbidden Ground born?",
        "context": [
            ["Forbidden Ground", ["Forbidden Ground is a Hungarian film directed by Pál Gábor.",
                                  "It was released in 1968."]],
            ["Stefan Friedmann", [
                "Stefan Friedmann( born 2 September 1941) is a Polish actor.",
                "He has made over 40 appearances in film and television.",
                'He starred in the 1978 comedy film" What Will You Do When You Catch Me?",',
                "He hosted the Miss Polski pageant.",
            ]],
            ["Pál Gábor", ["Pál Gábor (2 November 1932 – 21 October 1987) was born in Budapest."]],
        ],
        "supporting_facts": [["Forbidden Ground", 0], ["Pál Gábor", 0]],
        "evidences": [["Forbidden Ground", "director", "Pál Gábor"]],
        "answer": "Budapest",
        "answer_id": "Q1781",
    }
    (q,) = convert_2wikimultihopqa(dump(tmp_path / "dev.json", [rec]))
    assert (q.id, q.dataset, q.type) == (rec["_id"], "2wikimultihopqa", "compositional")
    assert q.answers == ("Budapest",)
    assert [c.is_supporting for c in q.contexts] == [True, False, True]
    assert q.contexts[0].text == (
        "Forbidden Ground is a Hungarian film directed by Pál Gábor. It was released in 1968."
    )
    assert q.contexts[1].text == (
        "Stefan Friedmann( born 2 September 1941) is a Polish actor. He has made over 40 appearances in "
        'film and television. He starred in the 1978 comedy film" What Will You Do When You Catch Me?", '
        "He hosted the Miss Polski pageant."
    )


def musique_record(qid: str = "3hop1__9285_5188_23307") -> dict[str, Any]:
    return {
        "id": qid,
        "paragraphs": [
            {"idx": i, "title": title, "paragraph_text": text, "is_supporting": gold}
            for i, (title, text, gold) in enumerate(
                [
                    ("Port Blair", "Port Blair is a capital.", False),
                    ("Mountrail County Courthouse", "Built in 1914.", True),
                    ("Van Hook Township", "In Mountrail County.", True),
                ]
            )
        ],
        "question": "What is the seat of the county where Van Hook Township is located?",
        "question_decomposition": [
            {"id": 574419, "question": "q", "answer": "a", "paragraph_support_idx": 2}
        ],
        "answer": "Stanley",
        "answer_aliases": ["Stanley, North Dakota", "Stanley"],
        "answerable": True,
    }


def test_musique_jsonl(tmp_path: Path) -> None:
    recs = [musique_record(), musique_record("2hop__1_2") | {"answer_aliases": []}]
    q, q2 = convert_musique(dump(tmp_path / "musique_ans_v1.0_dev.jsonl", recs, lines=True))
    assert q == Question(
        id="3hop1__9285_5188_23307",
        dataset="musique",
        question="What is the seat of the county where Van Hook Township is located?",
        answers=("Stanley", "Stanley, North Dakota"),
        type="3hop",
        contexts=(
            Context("Port Blair", "Port Blair is a capital.", False),
            Context("Mountrail County Courthouse", "Built in 1914.", True),
            Context("Van Hook Township", "In Mountrail County.", True),
        ),
    )
    assert (q2.type, q2.answers) == ("2hop", ("Stanley",))


def test_triviaqa_flashrag_jsonl(tmp_path: Path) -> None:
    recs = [
        {"id": "test_6321", "question": "How is 'Robin Goodfellow' better known?",
         "golden_answers": ["PUCK", "Puck", "Puck"]},
        {"id": 509, "question": "How many runs?", "golden_answers": ["None"], "metadata": {}},
    ]
    q, q2 = convert_triviaqa(dump(tmp_path / "test.jsonl", recs, lines=True))
    assert q == Question("test_6321", "triviaqa", "How is 'Robin Goodfellow' better known?",
                         ("PUCK", "Puck"), None, ())
    assert q2.id == "509"


def test_triviaqa_dpr_json(tmp_path: Path) -> None:
    recs = [{
        "dataset": "trivia_dev",
        "question": "Who wrote Hamlet?",
        "answers": ["Shakespeare", "William Shakespeare"],
        "positive_ctxs": [
            {"title": "Hamlet", "text": "Hamlet is by Shakespeare.", "score": 9, "passage_id": "1"}
        ],
        "negative_ctxs": [{"title": "Macbeth", "text": "A play.", "passage_id": "2"}],
        "hard_negative_ctxs": [{"title": "Hamlet (film)", "text": "A film.", "passage_id": "3"}],
    }]
    (q,) = convert_triviaqa(dump(tmp_path / "biencoder-trivia-dev.json", recs))
    assert q.id == "biencoder-trivia-dev-0"
    assert q.answers == ("Shakespeare", "William Shakespeare")
    assert [(c.title, c.is_supporting) for c in q.contexts] == [
        ("Hamlet", True), ("Macbeth", False), ("Hamlet (film)", False)
    ]


# --- malformed native input --------------------------------------------------------------------


def test_json_array_error_names_file_record_and_field(tmp_path: Path) -> None:
    bad = hotpot_record("b")
    del bad["question"]
    path = dump(tmp_path / "dev.json", [hotpot_record("a"), bad])
    with pytest.raises(DataFormatError) as info:
        convert_hotpotqa(path)
    assert str(info.value).startswith(f"{path}:record 1: field 'question': missing")


@pytest.mark.parametrize(
    ("context", "field"),
    [
        ([["Title only"]], "context[0]"),
        ([["T", "not a list"]], "context[0][1]"),
        ([["T", ["ok", 3]]], "context[0][1]"),
    ],
)
def test_bad_hotpot_context(tmp_path: Path, context: Any, field: str) -> None:
    path = dump(tmp_path / "dev.json", [hotpot_record() | {"context": context}])
    with pytest.raises(DataFormatError, match=re.escape(f"record 0: field '{field}'")):
        convert_hotpotqa(path)


def test_jsonl_errors_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "dev.jsonl"
    path.write_text(json.dumps(musique_record()) + "\n" + "{not json\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=rf"^{re.escape(str(path))}:2: field '<row>': invalid JSON"):
        convert_musique(path)
    bad = musique_record()
    bad["paragraphs"][1]["is_supporting"] = "yes"
    dump(path, [musique_record("2hop__1_2"), bad], lines=True)
    with pytest.raises(DataFormatError, match=re.escape(f"{path}:2: field 'paragraphs[1].is_supporting'")):
        convert_musique(path)


def test_wrong_types_in_triviaqa(tmp_path: Path) -> None:
    rec: dict[str, Any] = {"id": "x", "question": "q?", "golden_answers": "a"}
    path = dump(tmp_path / "t.jsonl", [rec], lines=True)
    with pytest.raises(DataFormatError, match=r":1: field 'golden_answers'"):
        convert_triviaqa(path)
    rec = {"question": "q?", "answers": ["a"], "positive_ctxs": [{"title": "t"}]}
    path = dump(tmp_path / "d.json", [rec])
    with pytest.raises(DataFormatError, match=r"record 0: field 'positive_ctxs\[0\].text'"):
        convert_triviaqa(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("\n")
    with pytest.raises(DataFormatError, match="file is empty"):
        convert_musique(path)


# --- writing and CLI ---------------------------------------------------------------------------


def test_write_jsonl_round_trips(tmp_path: Path) -> None:
    out = tmp_path / "nested" / "hotpotqa.jsonl"
    assert write_jsonl([HOTPOT_EXPECTED], out) == 1
    assert load_jsonl(out) == [HOTPOT_EXPECTED]


def test_cli_main(tmp_path: Path) -> None:
    src = dump(tmp_path / "musique.jsonl", [musique_record()], lines=True)
    out = tmp_path / "out.jsonl"
    assert main(["musique", str(src), str(out)]) == 0
    assert [q.id for q in load_jsonl(out)] == ["3hop1__9285_5188_23307"]
    assert main(["hotpotqa", str(src), str(tmp_path / "bad.jsonl")]) == 1  # wrong format
    assert not (tmp_path / "bad.jsonl").exists()


def test_cli_module_runs(tmp_path: Path) -> None:
    src = dump(tmp_path / "dev.json", [hotpot_record()])
    out = tmp_path / "hotpotqa.jsonl"
    proc = subprocess.run(
        [sys.executable, "-m", "ragfolio.core.data.converters", "hotpotqa", str(src), str(out)],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert load_jsonl(out) == [HOTPOT_EXPECTED]
