"""Routers by name: build one from its hyperparameters, load a saved one, and which ones can be served.

The registry holds every router class defined in the built-in router modules (the learned router,
every ablation and the routers that see the retrieval, ``pre_retrieval``, ``post_retrieval``,
``cascade``), and finds another package's by name through the ``ragfolio.routers`` entry points (the
lab's ``paper``); :func:`register_router` adds another
class (any class with the members of :class:`~ragfolio.core.routing.base.RouterProtocol`), and
:func:`import_router_modules` imports the modules that register a user's routers
(``router_training.router_modules``). :func:`load_router` reads the router's name from the
folder's ``router.json``, so whoever loads a router (the bundle, the Kedro dataset of routers) need
not know which kind it is; a router of a user's module also records that module there, and loading
imports it.

**Servable routers.** A router class that declares ``reads`` (one of :data:`READS`: what it needs
to route a query) can be served: router training trains it on every portfolio, judges it on the
dev questions and ``bundle.router: auto`` may choose it; the service routes it from query
features alone (``query``) or from the shared first stage and, for ``shortlist``, the results of
the members the router shortlists from it, for ``members`` every member's results
(:mod:`ragfolio.core.routing.online`). :func:`servable_names` lists them, cheapest first:
the order ties are broken in. Routers without ``reads`` (the ablations, the oracle, the paper's
router) are compared in reports only.
"""

from __future__ import annotations

import importlib
import inspect
import json
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar, cast

from ragfolio.core.routing.base import CONFIG_FILE, LEARNED, RouterProtocol, saved_name

# The modules of the built-in routers; every router class they define (a SavedRouter with a ``name`` of
# its own) is registered, so a new router in one of them needs no other line. Static imports, so that the
# DVC stages that load routers depend on these files (scripts/dvc_deps.py reads imports, not names).
from ragfolio.core.routing.routers import (
    baseline_routers,
    cascade,
    learned,
    logistic,
    neighbours,
    retrieval_routers,
)
from ragfolio.core.routing.routers.saved import SavedRouter

R = TypeVar("R", bound=type[RouterProtocol])

# Routers of other packages by name, ``name = "module:Class"`` (the lab's paper router is one): a class
# is imported when its name is first asked for, so a process that never asks imports nothing of theirs.
PLUGIN_GROUP = "ragfolio.routers"

# What a servable router reads to route, cheapest first: query features; the shared first stage; the first
# stage, then the results of the members it shortlists from it; every member's results.
READS = ("query", "first_stage", "shortlist", "members")

def _defined_in(*modules: ModuleType) -> list[type[RouterProtocol]]:
    """The router classes ``modules`` define, the learned router first, then by name."""
    found = [obj for module in modules for obj in vars(module).values()
             if isinstance(obj, type) and issubclass(obj, SavedRouter) and obj.__module__ == module.__name__
             and "name" in vars(obj) and not inspect.isabstract(obj)]
    return sorted(cast(list[type[RouterProtocol]], found), key=lambda cls: (cls.name != LEARNED, cls.name))


_ROUTERS: dict[str, type[RouterProtocol]] = {
    cls.name: cls
    for cls in _defined_in(baseline_routers, cascade, learned, logistic, neighbours, retrieval_routers)
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
    """The registered names, the learned router first, then the plugins' not yet loaded."""
    return list(dict.fromkeys([*_ROUTERS, *(plugin.name for plugin in entry_points(group=PLUGIN_GROUP))]))


def _load_plugin(name: str) -> None:
    """Register the ``ragfolio.routers`` entry point called ``name``, if there is one."""
    for plugin in entry_points(group=PLUGIN_GROUP, name=name):
        register_router(plugin.load())


def router_class(name: str) -> type[RouterProtocol]:
    """The class registered as ``name``.

    Raises:
        ValueError: No router is registered as ``name`` (the message lists those that are).
    """
    if name not in _ROUTERS:
        _load_plugin(name)
    if name not in _ROUTERS:
        raise ValueError(f"unknown router {name!r}; registered: {router_names()}")
    return _ROUTERS[name]


def make_router(name: str, **params: Any) -> RouterProtocol:
    """An unfitted router of kind ``name`` with hyperparameters ``params``."""
    return router_class(name)(**params)


def servable_names(*, learned: bool = True) -> list[str]:
    """The routers that can be served (their class declares ``reads``), cheapest first: by
    :data:`READS`, then in registration order; ``learned=False`` leaves out the learned router
    (its own nodes train it, with its ablations)."""
    ranked = sorted((READS.index(reads), i, name) for i, (name, cls) in enumerate(_ROUTERS.items())
                    if (reads := getattr(cls, "reads", None)) in READS)
    return [name for *_, name in ranked if learned or name != LEARNED]


def members_ran(router: RouterProtocol, l: int, k: int) -> int:  # noqa: E741 - the routers' name for members per query
    """Members a servable router runs for a query it routes to ``l`` of ``k``: its own
    ``members_ran(l)`` when it has one (the cascade's shortlist), else by what it reads (every member
    for ``members``; the ``l`` routed ones for ``query`` and ``first_stage``)."""
    own = getattr(router, "members_ran", None)
    if callable(own):
        return int(own(l))
    return k if getattr(router, "reads", None) == "members" else l


def check_servable(name: str, setting: str) -> str:
    """``name`` when it is a servable router, else a ValueError naming ``setting`` and the choices."""
    if name not in servable_names():
        raise ValueError(f"{setting}={name!r} is not a servable router; servable: {servable_names()} "
                         "(a router class declaring `reads`, registered by a module of router_training.router_modules)")
    return name


def import_router_modules(modules: Sequence[str]) -> None:
    """Import the modules that register a user's routers (:func:`register_router`); twice does nothing.

    Raises:
        ImportError: A module cannot be imported (the message names it).
    """
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ImportError(f"router module {module!r} cannot be imported: {error}") from error


def save_router(router: RouterProtocol, folder: str | Path) -> None:
    """``router.save(folder)``, and for a router defined outside ragfolio its module recorded in
    ``router.json`` (``module``), so that :func:`load_router` imports it in a process that has not."""
    router.save(folder)
    module = type(router).__module__
    if not module.startswith("ragfolio."):
        path = Path(folder) / CONFIG_FILE
        config = json.loads(path.read_text())
        if config.get("module") != module:
            path.write_text(json.dumps({**config, "module": module}, indent=1))


def load_router(folder: str | Path) -> RouterProtocol:
    """The router saved in ``folder``, of the kind its ``router.json`` names (the learned one if
    none), importing first the module it records when that kind is a user's router not yet registered."""
    name = saved_name(folder)
    if name not in _ROUTERS:
        module = json.loads((Path(folder) / CONFIG_FILE).read_text()).get("module")
        if module:
            import_router_modules([module])
    return router_class(name).load(folder)
