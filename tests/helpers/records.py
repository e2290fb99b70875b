"""A valid question record for tests to vary (imported by the data and loading tests)."""

from __future__ import annotations

from typing import Any


def row(qid: str = "q1", dataset: str = "toy", **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": qid,
        "dataset": dataset,
        "question": f"question {qid}?",
        "answers": ["yes", "Yes indeed"],
        "type": "bridge",
        "contexts": [
            {"title": "A", "text": "Alpha text.", "is_supporting": True},
            {"title": "B", "text": "Beta text.", "is_supporting": False},
        ],
    }
    base.update(over)
    return base
