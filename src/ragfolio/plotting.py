"""Figures for the pipelines' reports, built without ``pyplot``.

Nodes draw on :class:`matplotlib.figure.Figure` objects made here (matplotlib's object-oriented
API) instead of through ``pyplot``: no GUI backend is chosen and no global state is touched, at
import or when a figure is made, so nodes run headless anywhere without ``matplotlib.use("Agg")``.
A figure renders with the Agg canvas when the catalog's ``MatplotlibDataset`` saves it as PNG.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from matplotlib.figure import Figure


def subplots(
    nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float], **kwargs: Any
) -> tuple[Figure, npt.NDArray[Any]]:
    """A figure and its ``(nrows, ncols)`` array of axes (``kwargs`` go to :meth:`Figure.subplots`)."""
    figure = Figure(figsize=figsize)
    axes = figure.subplots(nrows, ncols, squeeze=False, **kwargs)
    return figure, np.asarray(axes)
