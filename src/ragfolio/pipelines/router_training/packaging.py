"""The ``router_training`` node that packages what is served: the bundle (``build_bundle``).

It reads what router training chose (``router_metrics["served"]``: the router, where it routes
and why) and writes one portfolio, its router and every corpus index its service searches.
"""

from __future__ import annotations

import logging
from typing import Any

from ragfolio.core.answering.rag import with_indexes
from ragfolio.core.bundle import PortfolioBundle
from ragfolio.core.cache import ArrayCache
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.retrieval.pool import CandidateSpec, encoders_used
from ragfolio.core.routing.base import RouterProtocol
from ragfolio.core.routing.features.router_features import RouterFeatures
from ragfolio.core.routing.judging.evaluation import report_order
from ragfolio.core.scoring.runners import CorpusRunners, PoolSettings, served_corpus
from ragfolio.core.scoring.utility_index import ALL
from ragfolio.core.selection.portfolios import Portfolios
from ragfolio.pipelines.router_training.params import RouterTrainingParams

logger = logging.getLogger(__name__)


def _member_index(members: list[int], candidate: int) -> int:
    """``candidate``'s position among ``members``; greedy's first pick (position 0) maximises the train
    mean, so the single best candidate is there unless a tie in the means was broken differently."""
    return members.index(candidate) if candidate in members else 0


def build_bundle(
    corpora: Corpora, candidates: list[dict[str, Any]], portfolios: Portfolios,
    routers: dict[str, RouterProtocol], router_metrics: dict[str, Any], router_features: RouterFeatures,
    pool_settings: PoolSettings, cache: ArrayCache, params: dict[str, Any],
    retrieval_routers: dict[str, dict[str, RouterProtocol]] | None = None,
) -> PortfolioBundle:
    """The served bundle: one portfolio and its router over the corpus its datasets retrieved from.

    With ``data_prep.corpus: union`` that is the union corpus, the one every number was measured
    on (the manifest's ``corpus.fingerprint`` equals the reports' ``corpus.fingerprint``). With
    ``per_dataset`` corpora the ``all`` portfolio serves their stacking
    (:func:`~ragfolio.core.scoring.runners.served_corpus`). ``selection.corpus`` records what the selection
    metrics were measured on; ``scoring`` is candidate scoring's ``pool_settings``. The router is
    the one ``router_metrics["served"]`` names (``bundle.router``: ``auto`` chose it by validation on
    train questions, or it was named): the learned one (query features only), or one of
    ``retrieval_routers`` (by kind: ``pre_retrieval``, ``post_retrieval`` and a user's servable
    routers; the bundle's ``routing`` carries the retrieval featurizer). ``selection.served_router`` records the choice, its reason and the validation
    values compared, and what the report measured of it on test. The bundle carries every corpus
    index its service searches, built here once (:func:`~ragfolio.core.answering.rag.with_indexes`).
    """
    p = RouterTrainingParams(**params)
    key = p.bundle.portfolio
    if key not in portfolios.keys:
        raise ValueError(f"router_training.bundle.portfolio={key!r} is not one of {sorted(portfolios.keys)}")
    sel, specs = portfolios.selection(key), [CandidateSpec.from_record(c) for c in candidates]
    members = [specs[i] for i in portfolios.members(key)]
    if p.bundle.default_l > len(members):
        raise ValueError(f"router_training.bundle.default_l={p.bundle.default_l} is above portfolio {key!r}'s "
                         f"k={len(members)}: set it to at most {len(members)}")
    encoders = list(dict.fromkeys([*encoders_used(members), *router_features.encoders]))
    names = corpora.names_for(corpora.datasets if key == ALL else [key])
    corpus, embeddings = served_corpus(CorpusRunners(corpora, cache.reader(), pool_settings), names, encoders)
    routed = router_metrics["datasets"].get(key, {})
    selection = {
        "greedy_train_values": sel.greedy_train_values[: portfolios.k],
        "certificate": sel.certificate,
        "n_train": sel.n_train,
        "test_best_of_l": {name: routed[name]["best_of_l"]
                           for name in report_order() if name in routed},
        "corpus": corpora.describe(),
    }
    served_entry = router_metrics.get("served") or {}
    name = served_entry.get("router") if served_entry.get("portfolio") == key else None
    routed_ls: tuple[int, ...] | None = None
    if name is None:  # a report without a choice (older): the configured router, or the learned one for auto
        name = "learned" if p.bundle.router == "auto" else p.bundle.router
    else:
        selection["served_router"] = {k: v for k, v in served_entry.items() if k != "corpus"}
        if served_entry.get("routed_ls") is not None:
            routed_ls = tuple(served_entry["routed_ls"])
    served = {"learned": routers, **(retrieval_routers or {})}.get(name, {})
    if key not in served:
        raise ValueError(f"no {name} router was trained for portfolio {key!r}")
    bundle = PortfolioBundle(
        name=key, corpus=corpus, members=members, router=served[key], scoring=pool_settings,
        routing=router_features,
        embeddings=embeddings, default_l=p.bundle.default_l, routed_ls=routed_ls,
        single_best=_member_index(portfolios.members(key), sel.single_best), selection=selection,
    )
    bundle = with_indexes(bundle)
    logger.info("bundle %r: %d members, %s router routing at l = %s (else the single best member, %s), "
                "%d passages (corpus %s), encoders %s, indexes %s", key, bundle.k, name,
                "all" if routed_ls is None else list(routed_ls) or "none", members[bundle.single_best].name,
                len(bundle.corpus), corpus.fingerprint, encoders,
                ", ".join(f"{index.kind} {index.key}" for index in bundle.indexes))
    return bundle
