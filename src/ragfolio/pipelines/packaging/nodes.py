"""The nodes of ``packaging``, the stage that assembles what is served: one bundle per portfolio key
(``build_bundles``) and which of them the service loads (``served_bundle``: a pointer, not a copy).

Each bundle serves the router that router training chose for its portfolio (the ``router_selection``
record: the router, where it routes and why; :func:`served_routers` finds it among the
``trained_routers``) and holds one portfolio, its router and every corpus index its service searches. ``answering_evaluation`` answers each dataset from its dataset's
bundle, and ``bentoml serve`` and the MLflow model load ``router_training.bundle.portfolio``'s: what
is evaluated is what is served. It reads the settings the choice was made under, ``router_training.bundle``
(:class:`~ragfolio.bundle_params.BundleParams`), and no other parameter.
It reads router training's outputs only: the test report (``router_metrics``, router evaluation's)
is not needed to package, so the bundle records what the choice was made on, not test numbers.
Every bundle carries the reader of ``packaging.reader`` (:class:`~ragfolio.core.llm.reader.ReaderSettings`);
Before they are saved, the served bundle's answers are checked on dev questions (do no harm on
answers, :mod:`~ragfolio.pipelines.packaging.served_answers`).
``served_bundle`` writes a pointer to the served one (``06_models/served.json``), not a copy.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ragfolio.bundle_params import BundleParams
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.bundle import PortfolioBundle
from ragfolio.core.data.corpora import Corpora
from ragfolio.core.llm.backend_config import EMBEDDED_LLM, backend_settings
from ragfolio.core.llm.reader import ReaderSettings
from ragfolio.core.retrieval.pool import CandidateSpec, encoders_used
from ragfolio.core.routing.base import RouterProtocol
from ragfolio.core.routing.features.router_features import RouterFeatures
from ragfolio.core.routing.judging.choice import RouterChoice, RouterSelection
from ragfolio.core.routing.judging.evaluation import RoutingComparison
from ragfolio.core.routing.judging.served import served_choice
from ragfolio.core.routing.judging.splits import TrainedRouters
from ragfolio.core.scoring.runners import CorpusRunners, ScoredPool, served_corpus
from ragfolio.core.scoring.utility_index import ALL
from ragfolio.core.selection.portfolios import Portfolios
from ragfolio.core.system.bundle_indexes import with_indexes
from ragfolio.param_blocks import kwargs_of
from ragfolio.pipelines.packaging.served_answers import AnswerCheckParams

logger = logging.getLogger(__name__)


class ReaderParams(BaseModel):
    """``packaging.reader``: the reader every bundle carries (:class:`~ragfolio.core.llm.reader.ReaderSettings`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    llm: dict[str, Any] = Field(default_factory=lambda: dict(EMBEDDED_LLM))  # a make_backend config
    answerer: Annotated[dict[str, Any], kwargs_of(Answerer, "packaging.reader.answerer", ("backend", "seed"))] = Field(
        default_factory=dict)

    @field_validator("llm")
    @classmethod
    def _llm(cls, block: dict[str, Any]) -> dict[str, Any]:
        backend_settings(block)  # the kind and its keys, as make_backend will read them
        return block


class PackagingParams(BaseModel):
    """``packaging`` parameters (conf/base/parameters_packaging.yml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    reader: ReaderParams = Field(default_factory=ReaderParams)
    answer_check: AnswerCheckParams = Field(default_factory=AnswerCheckParams)


@dataclass(frozen=True)
class PackagingSettings:
    """What the bundles are built under: router training's ``bundle`` block (the settings the served
    routers were chosen under) and the ``reader`` every bundle carries."""

    bundle: BundleParams
    reader: ReaderSettings


def packaging_settings(bundle: dict[str, Any], packaging: dict[str, Any]) -> PackagingSettings:
    """``router_training.bundle`` and ``packaging.reader``, validated (``packaging_settings``)."""
    reader = PackagingParams(**packaging).reader
    return PackagingSettings(BundleParams(**bundle), ReaderSettings(dict(reader.llm), dict(reader.answerer)))


def _member_index(members: list[int], candidate: int) -> int:
    """``candidate``'s position among ``members``; greedy's first pick (position 0) maximises the train
    mean, so the single best candidate is there unless a tie in the means was broken differently."""
    return members.index(candidate) if candidate in members else 0


@dataclass(frozen=True)
class ServedRouter:
    """What a portfolio's bundle serves: router training's ``choice`` and the fitted ``router`` it names."""

    choice: RouterChoice
    router: RouterProtocol


def served_routers(
    portfolios: Portfolios, router_selection: RouterSelection, trained_routers: TrainedRouters, bundle: dict[str, Any],
) -> dict[str, ServedRouter]:
    """Per portfolio key, the router router training chose for it (``served_routers``), among those it
    trained by kind (:meth:`~ragfolio.core.routing.judging.splits.TrainedRouters.by_kind`).

    Raises:
        ValueError: No router was chosen for a portfolio, it was chosen under another ``bundle.router``
            than this one, or it was not trained for the portfolio.
    """
    settings, by_kind, out = BundleParams(**bundle), trained_routers.by_kind(), {}
    for key in portfolios.keys:
        if (choice := router_selection.choices.get(key)) is None:
            raise ValueError(f"router training chose no router for portfolio {key!r} (it chose for "
                             f"{sorted(router_selection.choices)}): rerun router_training")
        if choice.requested != settings.router:  # the setting changed after router training chose
            raise ValueError(f"router_training.bundle.router={settings.router!r}, but router training chose under "
                             f"{choice.requested!r}: rerun router_training")
        if key not in (trained := by_kind.get(choice.router, {})):
            raise ValueError(f"no {choice.router} router was trained for portfolio {key!r}")
        out[key] = ServedRouter(choice, trained[key])
    return out


def build_bundles(
    scored_pool: ScoredPool, portfolios: Portfolios, served_routers: dict[str, ServedRouter],
    dev_router_comparison: dict[str, RoutingComparison], router_features: RouterFeatures, settings: PackagingSettings,
) -> dict[str, PortfolioBundle]:
    """One bundle per portfolio key (:func:`build_bundle`), the served portfolio's first, each carrying
    the reader of ``packaging.reader``.

    Raises:
        ValueError: ``bundle.portfolio`` is no portfolio, or a bundle cannot be built (:func:`build_bundle`).
    """
    chosen_under = settings.bundle  # the block router training chose under
    if chosen_under.portfolio not in portfolios.keys:
        raise ValueError(f"router_training.bundle.portfolio={chosen_under.portfolio!r} is not one of "
                         f"{sorted(portfolios.keys)}")
    keys = [chosen_under.portfolio, *(k for k in portfolios.keys if k != chosen_under.portfolio)]
    runners = scored_pool.runners(read_only=True)
    return {key: dataclasses.replace(
                build_bundle(key, chosen_under, scored_pool.corpora, list(scored_pool.candidates), portfolios,
                             served_routers[key], dev_router_comparison, router_features, runners),
                reader=settings.reader)
            for key in keys}


def served_bundle(bundles: Mapping[str, PortfolioBundle], bundle: dict[str, Any]) -> str:
    """The key of the bundle ``bentoml serve`` and the MLflow model load: ``router_training.bundle.portfolio``
    (the catalog's ``bundle`` stores it as a pointer to that bundle, :func:`~ragfolio.core.bundle.save_served`).

    Raises:
        ValueError: ``bundles`` holds no bundle of that key.
    """
    key = BundleParams(**bundle).portfolio
    if key not in bundles:
        raise ValueError(f"router_training.bundle.portfolio={key!r} has no bundle among {sorted(bundles)}: run packaging")
    return key


def build_bundle(
    key: str, settings: BundleParams, corpora: Corpora, specs: list[CandidateSpec], portfolios: Portfolios,
    served: ServedRouter, dev_router_comparison: dict[str, RoutingComparison], router_features: RouterFeatures,
    runners: CorpusRunners,
) -> PortfolioBundle:
    """Portfolio ``key`` and its router over the corpus its datasets retrieved from.

    With ``data_prep.corpus: union`` that is the union corpus, the one every number was measured
    on (the manifest's ``corpus.fingerprint`` equals the reports' ``corpus.fingerprint``). With
    ``per_dataset`` corpora the ``all`` portfolio serves their stacking
    (:func:`~ragfolio.core.scoring.runners.served_corpus`). ``selection.corpus`` records what the selection
    metrics were measured on; ``scoring`` is candidate scoring's ``pool_settings`` without the
    cross-encoder's fold models (:meth:`~ragfolio.core.scoring.runners.PoolSettings.served`). The router is
    the one ``router_selection.choices`` holds for the portfolio (``bundle.router``: ``auto`` chose
    it on dev or validation values of train questions, or it was named), routing at its
    ``routed_ls`` with its ``default_l`` (the smallest routed l, else ``bundle.default_l``; a choice
    recorded before it held one: ``bundle.default_l``): ``served``, the learned one (query features only)
    or another servable router (``pre_retrieval``, ``post_retrieval``, a user's; the bundle's
    ``routing`` carries the retrieval featurizer). ``selection.served_router``
    records the choice, its reason, the values and dev evidence compared, and the router's dev
    best-of-l as served (``dev_router_comparison``; :func:`~ragfolio.core.routing.judging.served.served_choice`);
    its test numbers are in the router report, which packaging does not read. The bundle carries every corpus
    index its service searches, built here once (:func:`~ragfolio.core.system.bundle_indexes.with_indexes`).

    Raises:
        ValueError: ``bundle.default_l`` is above its k.
    """
    sel = portfolios.selection(key)
    members = [specs[i] for i in portfolios.members(key)]
    if settings.default_l > len(members):
        raise ValueError(f"router_training.bundle.default_l={settings.default_l} is above portfolio {key!r}'s "
                         f"k={len(members)}: set it to at most {len(members)}")
    choice = served.choice
    encoders = list(dict.fromkeys([*encoders_used(members), *router_features.encoders]))
    names = corpora.names_for(corpora.datasets if key == ALL else [key])
    corpus, embeddings = served_corpus(runners, names, encoders)
    dev = dev_router_comparison[key].dev_report() if key in dev_router_comparison else None
    selection = _selection_record(key, portfolios, corpora, choice, dev, settings, runners.settings.num_docs)
    bundle = PortfolioBundle(
        name=key, corpus=corpus, members=members, router=served.router, scoring=runners.settings.served(),
        routing=router_features,
        embeddings=embeddings, default_l=choice.served_default_l(settings.default_l), routed_ls=choice.routed_ls,
        single_best=_member_index(portfolios.members(key), sel.single_best), selection=selection,
        selector_seed=settings.selector_seed,
    )
    bundle = with_indexes(bundle)
    logger.info("bundle %r: %d members, %s router routing at l = %s (else the single best member, %s), "
                "%d passages (corpus %s), encoders %s, indexes %s", key, bundle.k, choice.router,
                "all" if choice.routed_ls is None else list(choice.routed_ls) or "none",
                members[bundle.single_best].name, len(bundle.corpus), corpus.fingerprint, encoders,
                ", ".join(f"{index.kind} {index.key}" for index in bundle.indexes))
    return bundle


def _selection_record(
    key: str, portfolios: Portfolios, corpora: Corpora, choice: RouterChoice, dev: dict[str, Any] | None,
    settings: BundleParams, num_docs: int,
) -> dict[str, Any]:
    """The bundle's ``selection``: greedy's train values and certificate, the corpus measured on, and
    the served router's ``choice`` with its dev best-of-l (``dev``: the portfolio's dev report, None without dev questions)."""
    sel = portfolios.selection(key)
    return {
        "greedy_train_values": sel.greedy_train_values[: portfolios.k],
        "certificate": sel.certificate,
        "n_train": sel.n_train,
        "separation": sel.separation,
        "corpus": corpora.describe(),
        "served_router": served_choice(key, choice, default_l=settings.default_l, num_docs=num_docs, dev=dev),
    }
