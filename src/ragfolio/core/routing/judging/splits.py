"""One portfolio's questions of one split (train, dev or test) as routers read them: the rows of the
utility matrices that split holds, their router inputs and the members' utilities.

Router training fits on the train split and judges on dev; router evaluation routes the test split
with the same functions, so both read the rows in the same order.
"""

from __future__ import annotations

import numpy as np

from ragfolio.core.routing.base import RouteInputs, RouterProtocol
from ragfolio.core.routing.features.query_features import Features, stack_rows, take_rows
from ragfolio.core.routing.features.retrieval_features import RetrievalInputs
from ragfolio.core.routing.judging.evaluation import RoutingSplit
from ragfolio.core.scoring.utility_index import UtilityIndex, datasets_of, split_rows
from ragfolio.core.selection.portfolios import Portfolios

RoutersByKind = dict[str, dict[str, RouterProtocol]]  # router kind -> portfolio -> fitted router


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
