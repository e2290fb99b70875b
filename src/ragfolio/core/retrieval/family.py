"""The contract of a retriever family, and the registry that the candidate pool reads.

A family is a kind of candidate retriever (``bm25``, ``mmr``, ...): it declares its parameters and
ranks from the shared parts of a :class:`~ragfolio.core.retrieval.running.pool_runner.PoolRunner` (first-stage
rankings, embeddings, indexes, the passage graph), which the runner computes once for every
candidate that reads them. Adding a family is one module: subclass :class:`Family`, decorate the
class with :func:`register`, and import the module before the grid is expanded. The built-in
families (:mod:`ragfolio.core.retrieval.families`) are registered before any other, in a fixed
order.

A family may also rank as a *base*, a shared first-stage ranking that other candidates name in
a parameter (``bm25``, ``dense:<encoder>``, ``hybrid:<encoder>``): it says so (``base``,
``base_encoder``), what ranking as one reads (:meth:`Family.base_needs`) and how it ranks
(:meth:`Family.rank_base`); the runner reads the names through :func:`base_family` and
:func:`base_parts`, so no list of base names is kept anywhere else.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from ragfolio.core.retrieval.results import RetrievalResult

if TYPE_CHECKING:
    from ragfolio.core.retrieval.indexes.passage_graph import PassageGraph

Embedding = npt.NDArray[np.float32]
BACKENDS = ("inprocess", "elasticsearch")  # where the runner's BM25 and dense indexes live
H = TypeVar("H", bound=Hashable)
F = TypeVar("F", bound="Family")


@dataclass(frozen=True)
class DenseIndex:
    """A dense index over ``encoder``'s passage embeddings (``index_type`` flat | hnsw | auto)."""

    encoder: str
    index_type: str = "flat"
    backend: str = "inprocess"


@dataclass(frozen=True)
class Expansion:
    """Queries with base ``first``'s top passage appended (``append``: title | text), then
    ranked again by base ``second``."""

    first: str
    append: str
    second: str


@dataclass(frozen=True)
class SharedParts:
    """The shared parts a candidate reads, computed up front by :meth:`PoolRunner.prepare`.

    Attributes:
        query_encoders: Encoders whose query embeddings it reads.
        bases: First-stage rankings it reads (``bm25``, ``dense:<encoder>``, ``hybrid:<encoder>``);
            what a base itself reads (a dense base's query embeddings) is the runner's concern.
        expansions: Two-hop expansions it reads.
        bm25: BM25 indexes it searches, by their parameters (over the runner's default BM25).
        dense: Dense indexes it searches.
        passage_encoders: Encoders whose passage embeddings it reads.
        graph: Whether it walks the passage graph (the runner's, degree-capped).
        entity_graphs: The entity-capped passage graphs it walks, by their ``max_entity_df``.
        cross_encoder: Whether it scores pairs with the runner's trained cross-encoder (whose
            weights' digest then joins its cache key).
    """

    query_encoders: tuple[str, ...] = ()
    bases: tuple[str, ...] = ()
    expansions: tuple[Expansion, ...] = ()
    bm25: tuple[Mapping[str, Any], ...] = ()
    dense: tuple[DenseIndex, ...] = ()
    passage_encoders: tuple[str, ...] = ()
    graph: bool = False
    entity_graphs: tuple[int, ...] = ()
    cross_encoder: bool = False

    @classmethod
    def union(cls, parts: Iterable[SharedParts]) -> SharedParts:
        """Every part of ``parts`` once, in first-seen order (BM25 indexes equal by their items)."""
        parts = list(parts)
        bm25 = {tuple(sorted(p.items())): p for part in parts for p in part.bm25}
        return cls(
            query_encoders=_unique(e for part in parts for e in part.query_encoders),
            bases=_unique(b for part in parts for b in part.bases),
            expansions=_unique(x for part in parts for x in part.expansions),
            bm25=tuple(bm25.values()),
            dense=_unique(d for part in parts for d in part.dense),
            passage_encoders=_unique(e for part in parts for e in part.passage_encoders),
            graph=any(part.graph for part in parts),
            entity_graphs=_unique(cap for part in parts for cap in part.entity_graphs),
            cross_encoder=any(part.cross_encoder for part in parts),
        )


def _unique(items: Iterable[H]) -> tuple[H, ...]:
    return tuple(dict.fromkeys(items))


class TextIndex(Protocol):
    """A corpus index searched with query texts (BM25)."""

    def retrieve(self, queries: Sequence[str], k: int) -> RetrievalResult: ...


class VectorIndex(Protocol):
    """A corpus index searched with ``(n_queries, dim)`` query embeddings."""

    def retrieve_embedded(self, query_emb: Embedding, k: int) -> RetrievalResult: ...


class Parts(Protocol):
    """The shared parts a family ranks from; :class:`~ragfolio.core.retrieval.running.pool_runner.PoolRunner` is one.

    Each part is computed once per corpus (indexes, passage embeddings, the graph) or once per
    query batch (query embeddings, bases, expanded queries), whichever candidate asks first.
    """

    def base(self, name: str, queries: Sequence[str]) -> RetrievalResult:
        """A first-stage ranking (``bm25``, ``dense:<encoder>``, ``hybrid:<encoder>``), ``prefilter_depth`` deep."""
        ...

    def retrieve_with(self, base: str, queries: Sequence[str], depth: int) -> RetrievalResult:
        """Rank the corpus for ``queries`` (not necessarily the batch's) with a base retriever."""
        ...

    def query_embeddings(self, encoder: str, queries: Sequence[str]) -> Embedding:
        """``(n_queries, dim)`` L2-normalised query embeddings."""
        ...

    def passage_embeddings(self, encoder: str) -> Embedding:
        """``(n_passages, dim)`` L2-normalised passage embeddings."""
        ...

    def bm25(self, params: Mapping[str, Any]) -> TextIndex:
        """A BM25 index with ``params`` over the runner's default BM25 (``backend`` included)."""
        ...

    def dense(self, encoder: str, index_type: str = "auto", backend: str = "inprocess") -> VectorIndex:
        """A dense index over ``encoder``'s passage embeddings (``auto``: flat or HNSW by corpus size)."""
        ...

    def graph(self, max_entity_df: int | None = None) -> PassageGraph:
        """The passage graph of the corpus: degree-capped (None), or without the links through
        titles of a document frequency above ``max_entity_df`` (and no degree cap)."""
        ...

    def expanded_queries(self, first: str, append: str, queries: Sequence[str]) -> list[str]:
        """``queries`` with base ``first``'s top passage appended (``title`` or ``text``)."""
        ...

    def cross_scores(self, base: str, queries: Sequence[str], depth: int) -> npt.NDArray[np.float32]:
        """``(n_queries, depth)`` cross-encoder scores of each query with base ``base``'s top ``depth``
        passages, in the base's order (``-inf`` on padding)."""
        ...


class Family(ABC):
    """A kind of candidate retriever: its parameters, the shared parts it reads, how it ranks.

    A subclass sets the class attributes and implements :meth:`needs` and :meth:`run`. A family
    holds no state: one instance serves every candidate, from any thread. ``needs`` and ``run``
    receive a candidate's parameters with every parameter present (optional ones at their default
    when the candidate leaves them out).

    Attributes:
        name: The grid key and the prefix of candidate names, e.g. ``"bm25"``.
        params: Parameter -> default, in candidate-name order. A parameter at None is left out of
            the name; None is its value only when its default is None and it is not ``required``.
        required: Parameters every candidate must set (their default is None).
        optional: Parameters added after candidates were named and cached: parameter -> default,
            left out of a candidate's name and params while at the default, so adding one renames
            no candidate and invalidates no cached result.
        choices: The allowed values of some parameters, checked when a candidate is made.
        result_version: Part of every candidate's cache key: bump it when the family's rankings
            change for the same parameters, so cached results are recomputed
            (``tests/core/test_cache_versions.py`` fails when they change and it does not).
        first_stage: The parameter naming the base the family reorders, whose ranking completes
            the family's short rows first; None when the family ranks the corpus itself.
        base: Whether the family also ranks as a base (:meth:`rank_base`), named by its ``name``.
        base_encoder: Whether its base is named ``<name>:<encoder>`` and reads that encoder.
        live_updates: Whether it ranks passages added while serving (it reads only indexes, bases,
            embeddings and texts, which a live corpus extends); a family whose structure is built
            over the corpus (the passage graph) says False, and ranks the indexed passages until the
            next run (:mod:`ragfolio.core.retrieval.running.view_runner`).
    """

    name: ClassVar[str]
    params: ClassVar[Mapping[str, Any]]
    required: ClassVar[tuple[str, ...]] = ()
    optional: ClassVar[Mapping[str, Any]] = {}
    choices: ClassVar[Mapping[str, tuple[Any, ...]]] = {}
    result_version: ClassVar[int] = 1
    first_stage: ClassVar[str | None] = None
    base: ClassVar[bool] = False
    base_encoder: ClassVar[bool] = False
    live_updates: ClassVar[bool] = True

    def full_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A candidate's ``params`` with the optional parameters it leaves out at their defaults."""
        return {**self.optional, **params}

    @abstractmethod
    def needs(self, params: Mapping[str, Any]) -> SharedParts:
        """The shared parts that :meth:`run` with ``params`` reads."""

    @abstractmethod
    def run(self, parts: Parts, params: Mapping[str, Any], queries: Sequence[str], depth: int) -> RetrievalResult:
        """Rank for ``queries``: ``(n_queries, depth)`` (``depth``: the runner's ``num_docs``, passages per
        query), ``-1``-padded rows allowed (the runner completes them)."""

    def base_needs(self, encoder: str) -> SharedParts:
        """What ranking as base ``<name>[:<encoder>]`` reads, for whichever queries it ranks: query
        embeddings and indexes, and in ``bases`` the other bases it fuses (their rankings are the
        ``inputs`` of :meth:`rank_base`). None by default."""
        return SharedParts()

    def rank_base(
        self, parts: Parts, encoder: str, queries: Sequence[str], depth: int, inputs: Sequence[RetrievalResult]
    ) -> RetrievalResult:
        """Rank ``queries`` as a base, ``(n_queries, depth)``, at the runner's default settings.

        Args:
            parts: The runner's shared parts.
            encoder: What follows ``:`` in the base's name (empty without ``base_encoder``).
            queries: The queries to rank (the batch's, or expanded ones).
            depth: Passages per query.
            inputs: The rankings of the bases :meth:`base_needs` names, in order, as deep.
        """
        raise NotImplementedError(f"family {self.name!r} ranks as no base")


_REGISTRY: dict[str, Family] = {}


def _registry() -> dict[str, Family]:
    """The registry, the built-in families in it first."""
    # Importing the package registers the built-ins. While it runs (a built-in registering
    # itself), the import statement finds the package in sys.modules and returns at once.
    import ragfolio.core.retrieval.families  # noqa: F401

    return _REGISTRY


def register(cls: type[F]) -> type[F]:
    """Class decorator: register an instance of ``cls`` under ``cls.name``.

    Raises:
        ValueError: the name is taken, or the class attributes contradict each other (naming them).
    """
    registry = _registry()
    family = cls()
    name = getattr(family, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"{cls.__name__}.name={name!r} must be a non-empty string")
    if name in registry:
        raise ValueError(f"family {name!r} is already registered (by {type(registry[name]).__name__})")
    problems = _contradictions(family)
    if problems:
        raise ValueError(f"{name}: " + "; ".join(problems))
    registry[name] = family
    return cls


def _contradictions(family: Family) -> list[str]:
    """What is wrong with ``family``'s class attributes, one message each."""
    params, optional = getattr(family, "params", None), family.optional
    if not isinstance(params, Mapping):
        return [f"params={params!r} must map each parameter to its default"]
    problems = [f"required parameter {key!r} must be in params with default None"
                for key in family.required if key not in params or params[key] is not None]
    problems += [f"parameter {key!r} is in both params and optional" for key in optional if key in params]
    problems += [f"choices name {key!r}, in neither params nor optional"
                 for key in family.choices if key not in params and key not in optional]
    if family.first_stage is not None and family.first_stage not in params:
        problems.append(f"first_stage={family.first_stage!r} is not in params {sorted(params)}")
    if not isinstance(family.result_version, int) or family.result_version < 1:
        problems.append(f"result_version={family.result_version!r} must be an int >= 1")
    if family.base_encoder and not family.base:
        problems.append("base_encoder=True needs base=True")
    if family.base and type(family).rank_base is Family.rank_base:
        problems.append("base=True needs rank_base")
    return problems


def get_family(name: str) -> Family:
    """The family registered as ``name``.

    Raises:
        ValueError: no family is registered as ``name`` (naming the registered ones).
    """
    registry = _registry()
    if name not in registry:
        raise ValueError(f"family={name!r} is not one of {sorted(registry)}")
    return registry[name]


def import_families(modules: Sequence[str]) -> None:
    """Import ``modules`` (dotted names), whose ``@register`` classes add families to the registry.

    A grid can then name those families like built-ins: this is how a ``kedro run`` uses a family
    defined outside ragfolio (``candidate_scoring.family_modules``). Importing twice does nothing.

    Raises:
        ImportError: a module cannot be imported (naming it).
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ImportError(
                f"cannot import the family module {module!r} ({err}); is it on the Python path of this run?"
            ) from err


def families() -> dict[str, Family]:
    """Every registered family by name, in registration order (the built-ins first)."""
    return dict(_registry())


def base_family(base: str) -> tuple[Family, str]:
    """The family that ranks base ``base`` (``bm25``, ``dense:<encoder>``, ...) and the encoder it names.

    Raises:
        ValueError: ``base`` names no base of a registered family (the message lists the base names).
    """
    name, _, encoder = base.partition(":")
    family = _registry().get(name)
    if family is None or not family.base or family.base_encoder != bool(encoder):
        names = [f"'{f.name}:<encoder>'" if f.base_encoder else f"'{f.name}'" for f in _registry().values() if f.base]
        listed = " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
        raise ValueError(f"base={base!r} must be {listed}")
    return family, encoder


def base_parts(base: str) -> SharedParts:
    """What ranking with base ``base`` reads (:meth:`Family.base_needs`); nothing when it names no base."""
    try:
        family, encoder = base_family(base)
    except ValueError:  # a candidate naming no base fails when it runs, alone
        return SharedParts()
    return family.base_needs(encoder)
