"""What question_synthesis needs in a test's catalog beside what the stages around it have: the
labelled questions as a file (data_prep writes them, question_synthesis reads them in another run),
its store and its parameters (labelled questions pass through, so the defaults do)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kedro.io import MemoryDataset
from kedro_datasets.json import JSONDataset

from ragfolio.core.synthesis.store import RecordStore


def synthesis_datasets(root: Path) -> dict[str, Any]:
    return {"labelled_questions": JSONDataset(filepath=str(root / "labelled_questions.json")),
            "synthesis_store": MemoryDataset(RecordStore(None), copy_mode="assign"),
            "params:question_synthesis": MemoryDataset({})}
