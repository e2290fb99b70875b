"""A retrieval request as everything below the edge reads it: its query, ``l`` and depth, resolved once.

What a caller sends may leave ``l`` (members to route to) and ``num_docs`` (passages per member)
out. The edge (the service, through :meth:`ragfolio.serving.engine.ServingEngine.item`; the MLflow
model's ``predict``) turns it into a :class:`RetrievalRequest` with :meth:`RequestRules.request`,
the one place that puts the defaults in and checks the range. The routed system, the online
routing and the executor take the record as it is: none of them defaults or checks ``l`` or the
depth again (a router checks its own contract, ``1 <= l <= k``, in
:class:`~ragfolio.core.routing.routers.saved.SavedRouter`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetrievalRequest:
    """One query to route and retrieve for, its settings resolved.

    Attributes:
        query: The question (what is routed and retrieved for; the service strips it first).
        l: Members to route to, 1..k.
        depth: Passages per member (``num_docs``), 1..``prefilter_depth``.
    """

    query: str
    l: int  # noqa: E741 - the paper's and the API's name
    depth: int


def _check(name: str, value: int, high: int, what: str) -> None:
    if not 1 <= value <= high:
        raise ValueError(f"{name}={value} must be in 1..{high} ({what})")


@dataclass(frozen=True)
class RequestRules:
    """How a request's missing ``l`` and ``num_docs`` are filled in, and the range they must be in.

    Attributes:
        default_l: Members a request that does not say is routed to.
        default_depth: Passages per member of a request that does not say: the bundle's ``num_docs``
            (the depth its members were selected and its router trained at).
        k: The portfolio's members (the largest l).
        max_depth: The deepest ``num_docs`` (``prefilter_depth``: the depth of the first-stage rankings
            every depth shares). The service's ``max_num_docs`` is checked where it parses a request.

    Raises:
        ValueError: ``default_l`` or ``default_depth`` is out of its range (the message names it).
    """

    default_l: int
    default_depth: int
    k: int
    max_depth: int

    def __post_init__(self) -> None:
        _check("default_l", self.default_l, self.k, "the bundle's members")
        _check("num_docs", self.default_depth, self.max_depth, "prefilter_depth")

    def request(self, query: str, l: int | None = None, num_docs: int | None = None) -> RetrievalRequest:  # noqa: E741
        """The request for ``query`` with ``l`` members and ``num_docs`` passages each (None: the defaults).

        Raises:
            ValueError: ``l`` is outside 1..k or ``num_docs`` outside 1..``max_depth``.
        """
        l = self.default_l if l is None else int(l)  # noqa: E741
        depth = self.default_depth if num_docs is None else int(num_docs)
        _check("l", l, self.k, "the bundle's members")
        _check("num_docs", depth, self.max_depth, "prefilter_depth")
        return RetrievalRequest(query, l, depth)
