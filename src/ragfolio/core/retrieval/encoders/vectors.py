"""What every encoder does around its model: cut a text to its first words, L2-normalise rows."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


def first_words(text: str, n: int) -> str:
    """``text`` cut to its first ``n`` whitespace-separated words, joined by single spaces."""
    return " ".join(text.split()[:n])


def l2_normalise(x: npt.ArrayLike) -> npt.NDArray[np.float32]:
    """Rows of ``x`` as float32 scaled to unit L2 norm (all-zero rows stay zero)."""
    rows: npt.NDArray[Any] = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.maximum(norms, 1e-12)
