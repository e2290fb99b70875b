"""The nearest-neighbours routing ablation: members scored by how they did on similar train questions.

A query's score for member j is the mean utility of j on the query's ``n_neighbours`` nearest
train questions, by cosine similarity of the query features (every block side by side, sorted by
name, as the logistic ablation reads them: the hashed n-grams and the encoders' query embeddings).
It learns nothing beyond the train questions themselves, so it shows how much of routing is
"questions like this one went to that member".

Saved as ``router.json`` (hyperparameters, members) and ``router.safetensors`` (the train
questions' unit-norm features as CSR arrays, and their utilities); no pickle.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sklearn.preprocessing import normalize

from ragfolio.core.routing.base import (
    Picks,
    RouteInputs,
    Scores,
    check_training_data,
    member_names,
    ranked,
)
from ragfolio.core.routing.features.query_features import Features, design_matrix
from ragfolio.core.routing.routers.saved import SavedRouter


def _unit_rows(features: Features) -> sp.csr_matrix:
    """All blocks side by side (:func:`design_matrix`), each row scaled to unit L2 norm."""
    return normalize(design_matrix(features).astype(np.float32), norm="l2", axis=1)


@dataclass
class NearestNeighbourRouter(SavedRouter):
    """Mean member utility over the ``n_neighbours`` most similar train questions.

    Attributes:
        n_neighbours: Train questions averaged per query (fewer when there are fewer).

    Learned attributes (after ``fit``): ``members_``, ``keys_`` (the train questions' unit-norm
    features, CSR) and ``utilities_`` ``(n_train, k)``.
    """

    name: ClassVar[str] = "nearest_neighbour"
    judged_as: ClassVar[Mapping[str, int]] = {"ablation": 5}  # ragfolio.core.routing.judging
    n_neighbours: int = 20
    members_: list[str] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.n_neighbours < 1:
            raise ValueError(f"n_neighbours={self.n_neighbours} must be >= 1")

    def fit(self, inputs: RouteInputs, U: npt.NDArray[np.floating[Any]], members: Sequence[str] | None = None) -> Self:
        U = check_training_data(inputs, U)
        if len(U) == 0:
            raise ValueError("no train questions: nothing to compare queries with")
        self.members_ = member_names(members, U.shape[1])
        self.keys_, self.utilities_ = _unit_rows(inputs.query), U
        return self

    def _route(self, inputs: RouteInputs, l: int) -> tuple[Picks, Scores]:
        """Members by decreasing mean utility on the query's nearest train questions (the scores)."""
        similarity = np.asarray((_unit_rows(inputs.query) @ self.keys_.T).todense())  # (n, n_train)
        n = min(self.n_neighbours, similarity.shape[1])
        nearest = np.argsort(-similarity, axis=1, kind="stable")[:, :n]  # ties: the earlier train question
        scores = self.utilities_[nearest].mean(axis=1)  # (n_queries, k)
        return ranked(scores, l), scores

    def _check_fitted(self) -> None:
        if not hasattr(self, "keys_"):
            raise RuntimeError("this NearestNeighbourRouter is not fitted: call fit() or load() first")

    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        keys = self.keys_
        config = {"hyperparameters": {"n_neighbours": self.n_neighbours}, "members": self.members_,
                  "key_shape": list(keys.shape)}
        return config, {"data": keys.data, "indices": keys.indices.astype(np.int64),
                        "indptr": keys.indptr.astype(np.int64), "utilities": np.ascontiguousarray(self.utilities_)}

    @classmethod
    def _from_state(cls, config: Mapping[str, Any], arrays: Mapping[str, Any]) -> Self:
        router = cls(**config["hyperparameters"])
        router.members_ = list(config["members"])
        router.keys_ = sp.csr_matrix((arrays["data"], arrays["indices"], arrays["indptr"]), shape=tuple(config["key_shape"]))
        router.utilities_ = arrays["utilities"]
        return router
