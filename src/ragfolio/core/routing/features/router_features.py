"""What a router reads, as router training fixed it: one frozen record, written once and read by every later user.

``router_training`` writes a :class:`RouterFeatures` (``data/06_models/router_features.json``)
and the bundle carries the same record (its manifest's ``routing``): the text hasher, the pool
encoders whose query embeddings are query blocks, and the featurizer of the routers that see the
retrieval. Answering, the service and the MLflow model rebuild a router's inputs from it, so a
router is always fed what it was trained on.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from ragfolio.core.record_checks import checked_fields, read_version
from ragfolio.core.routing.features.query_features import TextHasher
from ragfolio.core.routing.features.retrieval_features import RetrievalFeaturizer

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class RetrievalFeatureSettings:
    """The retrieval routers' featurizer, less the list depth (the runner's ``num_docs``).

    ``judge``: the member features hold the list judgements, which read the cross-encoder the
    pool settings name (a bundle then carries it). Recorded only when set, so records written
    before it read as they were.
    """

    encoders: tuple[str, ...]
    agreement_depth: int
    judge: bool = False

    def featurizer(self, num_docs: int) -> RetrievalFeaturizer:
        return RetrievalFeaturizer(self.encoders, num_docs, self.agreement_depth, self.judge)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        settings = checked_fields(cls, data, "retrieval_features")
        return cls(tuple(settings["encoders"]), int(settings["agreement_depth"]), bool(settings.get("judge", False)))

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"encoders": list(self.encoders), "agreement_depth": self.agreement_depth}
        return {**data, "judge": True} if self.judge else data


@dataclass(frozen=True)
class RouterFeatures:
    """A router's inputs.

    Attributes:
        text_features: The hashed n-gram block's hasher.
        encoders: Pool encoders whose query embeddings are query blocks (their cache holds them).
        retrieval_features: The featurizer of the routers that see the retrieval (``None`` in
            bundles written before those routers existed).
    """

    text_features: TextHasher
    encoders: tuple[str, ...]
    retrieval_features: RetrievalFeatureSettings | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        """The record of a :meth:`to_dict` mapping (without ``schema_version``: version 1).

        Raises:
            ValueError: A newer schema, or a key unknown or missing (the message names them).
        """
        features = checked_fields(cls, read_version(data, "router features", SCHEMA_VERSION), "router features")
        retrieval = features.get("retrieval_features")
        return cls(
            text_features=TextHasher.from_dict(features["text_features"]), encoders=tuple(features["encoders"]),
            retrieval_features=None if retrieval is None else RetrievalFeatureSettings.from_dict(retrieval),
        )

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "text_features": self.text_features.to_dict(),
                                "encoders": list(self.encoders)}
        if self.retrieval_features is not None:
            data["retrieval_features"] = self.retrieval_features.to_dict()
        return data
