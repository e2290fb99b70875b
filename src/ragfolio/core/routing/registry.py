"""Routers by name: build one from its hyperparameters, or load a saved one from its folder.

The registry holds the learned router, every ablation and the routers that see the retrieval
(``pre_retrieval``, ``post_retrieval``); :func:`register_router` adds another
class (any class with the members of :class:`~ragfolio.core.routing.base.RouterProtocol`).
:func:`load_router` reads the router's name from the folder's ``router.json``, so whoever loads a
router (the bundle, the Kedro dataset of routers) need not know which kind it is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from ragfolio.core.routing.base import RouterProtocol, saved_name
from ragfolio.core.routing.routers.baseline_routers import (
    GreedyPrefixRouter,
    OracleRouter,
    RandomRouter,
    TopAverageRouter,
)
from ragfolio.core.routing.routers.learned import Router
from ragfolio.core.routing.routers.logistic import LogisticRouter
from ragfolio.core.routing.routers.neighbours import NearestNeighbourRouter
from ragfolio.core.routing.routers.paper import PaperRouter
from ragfolio.core.routing.routers.retrieval_routers import PostRetrievalRouter, PreRetrievalRouter

R = TypeVar("R", bound=type[RouterProtocol])

_ROUTERS: dict[str, type[RouterProtocol]] = {
    cls.name: cls
    for cls in (
        Router, RandomRouter, TopAverageRouter, GreedyPrefixRouter, LogisticRouter, NearestNeighbourRouter,
        OracleRouter,
        PreRetrievalRouter, PostRetrievalRouter, PaperRouter,
    )
}


def register_router(cls: R) -> R:
    """Make ``cls`` available by ``cls.name`` (usable as a class decorator); returns ``cls``.

    Raises:
        ValueError: Another class is registered under that name.
    """
    taken = _ROUTERS.get(cls.name)
    if taken is not None and taken is not cls:
        raise ValueError(f"router name {cls.name!r} is taken by {taken.__module__}.{taken.__qualname__}")
    _ROUTERS[cls.name] = cls
    return cls


def router_names() -> list[str]:
    """The registered names, the learned router first."""
    return list(_ROUTERS)


def router_class(name: str) -> type[RouterProtocol]:
    """The class registered as ``name``.

    Raises:
        ValueError: No router is registered as ``name`` (the message lists those that are).
    """
    if name not in _ROUTERS:
        raise ValueError(f"unknown router {name!r}; registered: {router_names()}")
    return _ROUTERS[name]


def make_router(name: str, **params: Any) -> RouterProtocol:
    """An unfitted router of kind ``name`` with hyperparameters ``params``."""
    return router_class(name)(**params)


def load_router(folder: str | Path) -> RouterProtocol:
    """The router saved in ``folder``, of the kind its ``router.json`` names (the learned one if none)."""
    return router_class(saved_name(folder)).load(folder)
