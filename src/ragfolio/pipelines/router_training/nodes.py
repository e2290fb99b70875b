"""Nodes of ``router_training``: the routers' inputs, query features -> one learned router per portfolio.

Runners are built from candidate scoring's ``pool_settings`` (what it actually ran with), and the
router features this stage uses are written as ``router_features`` for the stages after it.
Beside the learned router, the routers that see the retrieval (``pre_retrieval``,
``post_retrieval``) are trained on features of the first-stage rankings and of each member's
results (``retrieval_inputs``), read from the retrieval cache candidate scoring filled.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.routing.base import RouterProtocol
from ragfolio.core.routing.features.query_features import Features, TextHasher, query_features
from ragfolio.core.routing.features.router_features import RouterFeatures
from ragfolio.core.routing.judging.splits import query_split
from ragfolio.core.routing.registry import make_router
from ragfolio.core.scoring.runners import CorpusRunners, PoolSettings
from ragfolio.core.scoring.utility_index import UtilityIndex, row_questions
from ragfolio.core.selection.portfolios import Portfolios
from ragfolio.router_params import RouterTrainingParams

logger = logging.getLogger(__name__)


def router_settings(pool_settings: PoolSettings, params: dict[str, Any]) -> RouterFeatures:
    """The routers' inputs (``router_features``): the text hasher, the encoders of the query blocks
    and the featurizer of the routers that see the retrieval (which answering rebuilds to route).

    The encoders must be ones candidate scoring ran, whose query embeddings the cache holds.
    """
    p = RouterTrainingParams(**params)
    if unknown := sorted(set(p.encoders) - set(pool_settings.encoders)):
        raise ValueError(
            f"router_training.encoders {unknown} are not candidate_scoring encoders {sorted(pool_settings.encoders)}"
        )
    return RouterFeatures(TextHasher.from_dict(p.text_features), tuple(p.encoders),
                          p.retrieval_features(pool_settings.cross_encoder))


def build_query_features(
    questions: list[dict[str, Any]], corpora: Corpora, utility_index: UtilityIndex,
    pool_settings: PoolSettings, router_features: RouterFeatures, cache: ArrayCache,
) -> dict[str, Features]:
    """Router features of every utility-matrix row, per dataset, in row order (``router_inputs``).

    Query embeddings come from each dataset's corpus runner (datasets sharing a corpus share it).
    """
    runners = CorpusRunners(corpora, cache, pool_settings)
    hasher = router_features.text_features
    out = {}
    for dataset in utility_index.datasets:
        texts = [q.question for q in row_questions(questions, utility_index, dataset)]
        runner = runners.for_dataset(dataset)
        embeddings = {name: runner.query_embeddings(name, texts) for name in router_features.encoders}
        out[dataset] = query_features(texts, embeddings, hasher)
    return out


def train_routers(
    router_inputs: dict[str, Features], utility_matrices: dict[str, np.ndarray], utility_index: UtilityIndex,
    portfolios: Portfolios, params: dict[str, Any],
) -> dict[str, RouterProtocol]:
    """One learned router per portfolio (each dataset's and ``all``), trained on its train questions."""
    p = RouterTrainingParams(**params)
    routers = {}
    for key, sel in portfolios.selections.items():
        train = query_split(router_inputs, utility_matrices, utility_index, key, portfolios.members(key), "train")
        router = make_router("learned", **{"random_state": p.seed, **p.router})
        routers[key] = router.fit(train.inputs, train.utilities, sel.portfolio)
        logger.info("%s: router over %d members trained on %d questions", key, len(sel.portfolio),
                    len(train.utilities))
    return routers


