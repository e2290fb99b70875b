"""One portfolio's questions of one split (train, dev or test) as routers read them: the rows of the
utility matrices that split holds, their router inputs and the members' utilities.

Router training fits on the train split and judges on dev; router evaluation routes the test split
with the same functions, so both read the rows in the same order. :class:`RoutingRows` holds what
those functions read, for a stage to pass as one record; :class:`TrainedRouters` the servable
routers router training fitted, kept in two datasets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from ragfolio.core.routing.base import RouteInputs, RouterProtocol
from ragfolio.core.routing.features.query_features import Features, stack_rows, take_rows
from ragfolio.core.routing.features.retrieval_features import RetrievalInputs
from ragfolio.core.routing.judging.evaluation import RoutingSplit
from ragfolio.core.scoring.utility_index import UtilityIndex, datasets_of, split_rows
from ragfolio.core.selection.portfolios import Portfolios

RoutersByKind = dict[str, dict[str, RouterProtocol]]  # router kind -> portfolio -> fitted router


@dataclass(frozen=True)
class TrainedRouters:
    """The servable routers router training fitted per portfolio, as it stores them: the learned one,
    fitted on query features (``routers``), and the others by kind, fitted on query and retrieval
    features (``retrieval_routers``)."""

    learned: dict[str, RouterProtocol]
    retrieval: RoutersByKind

    def by_kind(self) -> RoutersByKind:
        """Every one by kind (its router's registry ``name``), then portfolio, the learned ones first."""
        kinds: RoutersByKind = {}
        for key, router in self.learned.items():
            kinds.setdefault(router.name, {})[key] = router
        for kind, trained in self.retrieval.items():
            kinds.setdefault(kind, {}).update(trained)
        return kinds


def routers_of(retrieval_routers: RoutersByKind, key: str) -> dict[str, RouterProtocol]:
    """Portfolio ``key``'s router of each kind."""
    return {kind: trained[key] for kind, trained in retrieval_routers.items()}


def query_split(
    router_inputs: dict[str, Features], utility_matrices: dict[str, np.ndarray], utility_index: UtilityIndex,
    key: str, members: list[int], split: str,
) -> RoutingSplit:
    """Router inputs and member utilities ``(n, k)`` of ``split`` rows of one dataset, or of all stacked."""
    rows = {d: split_rows(utility_index, d, split) for d in datasets_of(utility_index, key)}
    X = stack_rows([take_rows(router_inputs[d], r) for d, r in rows.items()])
    U = np.concatenate([np.asarray(utility_matrices[d])[r][:, members] for d, r in rows.items()])
    return RoutingSplit(RouteInputs(X), U)


def retrieval_split(
    router_inputs: dict[str, Features], retrieval_inputs: RetrievalInputs, utility_matrices: dict[str, np.ndarray],
    utility_index: UtilityIndex, portfolios: Portfolios, key: str, split: str,
) -> RoutingSplit:
    """The query-feature split of :func:`query_split` with ``first_stage`` among its query blocks and
    ``results["members"]`` ``(n, k, d_m)``."""
    base = query_split(router_inputs, utility_matrices, utility_index, key, portfolios.members(key), split)
    rows = {d: split_rows(utility_index, d, split) for d in datasets_of(utility_index, key)}
    first = np.concatenate([retrieval_inputs.first_stage[d][r] for d, r in rows.items()])
    members = np.concatenate([retrieval_inputs.members[key][d][r] for d, r in rows.items()])
    inputs = RouteInputs({**base.inputs.query, "first_stage": first}, {"members": members})
    return RoutingSplit(inputs, base.utilities)


@dataclass(frozen=True)
class RoutingRows:
    """What routers read and are judged by, utility-matrix row by row: the arguments of
    :func:`query_split` and :func:`retrieval_split`, as one record.

    Attributes:
        router_inputs: Per dataset, the query features of every row (``router_inputs``).
        utility_matrices: Per dataset, the ``(n_questions, n_candidates)`` utilities.
        utility_index: What the rows and columns are (question ids and splits, candidates).
        portfolios: Each portfolio's members (columns).
        retrieval_inputs: The retrieval features of every row (``retrieval_inputs``); None: not read.
    """

    router_inputs: dict[str, Features]
    utility_matrices: dict[str, np.ndarray]
    utility_index: UtilityIndex
    portfolios: Portfolios
    retrieval_inputs: RetrievalInputs | None = None

    def query_split(self, key: str, split: str, members: list[int] | None = None) -> RoutingSplit:
        """:func:`query_split` of portfolio (or dataset) ``key``, over ``members`` (default: ``key``'s)."""
        members = self.portfolios.members(key) if members is None else members
        return query_split(self.router_inputs, self.utility_matrices, self.utility_index, key, members, split)

    def retrieval_split(self, key: str, split: str) -> RoutingSplit:
        """:func:`retrieval_split` of portfolio ``key``.

        Raises:
            ValueError: These rows carry no retrieval features.
        """
        if self.retrieval_inputs is None:
            raise ValueError("these routing rows carry no retrieval_inputs")
        return retrieval_split(self.router_inputs, self.retrieval_inputs, self.utility_matrices, self.utility_index,
                               self.portfolios, key, split)

    def with_query_blocks(self, blocks: Mapping[str, Features]) -> RoutingRows:
        """The same rows with more query blocks per dataset (``{dataset: {block: (n, dim)}}``)."""
        return replace(self, router_inputs={d: {**features, **blocks.get(d, {})}
                                            for d, features in self.router_inputs.items()})
