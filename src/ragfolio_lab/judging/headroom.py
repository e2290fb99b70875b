"""Headroom: how often some member beats the default, and how much of that a router takes.

On test questions with member utilities ``U`` ``(n, k)`` and a *default* member d (the best
train mean), a question has headroom when some member is strictly better than d on it
(``max_j U[q, j] > U[q, d]``). For a router whose first pick on q is ``r(q)``:

* ``captured``: share of the headroom questions where ``U[q, r(q)] > U[q, d]`` (it moved to a
  strictly better member);
* ``worse``: share of *all* questions where ``U[q, r(q)] < U[q, d]`` (it moved to a strictly
  worse member, the price of switching);
* ``switched``: share of all questions where ``r(q) != d``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.routing.base import Picks

TOLERANCE = 1e-6  # utilities closer than this are equal


def headroom(
    U: npt.NDArray[np.floating[Any]], default: int, picks: Mapping[str, Picks]
) -> dict[str, Any]:
    """The headroom of ``U`` over member ``default`` and what each router's first pick took of it.

    Args:
        U: ``(n, k)`` test utilities.
        default: The default member's column.
        picks: Router name -> ``(n, >= 1)`` routing, best first.

    Returns:
        ``{"default": d, "n": n, "share": share of questions with headroom, "routers": {name:
        {"captured", "worse", "switched"}}}`` (shares are None without questions).
    """
    U = np.asarray(U, dtype=np.float64)
    n = len(U)
    base = U[:, default]
    room = U.max(axis=1) > base + TOLERANCE if n else np.zeros(0, dtype=bool)

    def share(mask: npt.NDArray[np.bool_]) -> float | None:
        return float(mask.mean()) if mask.size else None

    routers = {}
    for name, routing in picks.items():
        first = np.asarray(routing, dtype=np.int64)[:, 0] if n else np.zeros(0, dtype=np.int64)
        chosen = U[np.arange(n), first]
        routers[name] = {
            "captured": share((chosen > base + TOLERANCE)[room]),
            "worse": share(chosen < base - TOLERANCE),
            "switched": share(first != default),
        }
    return {"default": int(default), "n": n, "share": share(room), "routers": routers}
