"""Measured times one stage hands another, as a JSON file that may be absent."""

from __future__ import annotations

from typing import Any

from kedro_datasets.json import JSONDataset


class TimingsDataset(JSONDataset):
    """Measured times one stage hands another (``08_reporting/timings/``, which neither git nor DVC
    tracks: :mod:`ragfolio.core.timings`). A missing file, as after a ``dvc pull`` on another machine,
    loads as ``{}``: no timings to report, and nothing a stage's results depend on."""

    def load(self) -> Any:
        return super().load() if super()._exists() else {}

    def _exists(self) -> bool:
        return True
