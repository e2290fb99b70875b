"""What every saved router shares: a folder with ``router.json`` and, when it has arrays, ``router.safetensors``.

A router class derives from :class:`SavedRouter` and says four things: whether it is fitted
(:meth:`~SavedRouter._check_fitted`), how it ranks the members (:meth:`~SavedRouter._route`), what
it holds (:meth:`~SavedRouter._state`: the JSON config and the named arrays) and how to rebuild
itself from them (:meth:`~SavedRouter._from_state`). ``route`` is the base's: it checks, once for
every router, that the router is fitted and that ``l`` is in 1..k, then calls ``_route``.
``save`` and ``load`` are the base's too: the name check of ``router.json``
(:func:`~ragfolio.core.routing.base.read_config`), the missing-weights error and the safetensors
flavour (:attr:`~SavedRouter.tensors`: ``numpy`` arrays or ``torch`` tensors) live here once. No
pickles anywhere.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal, Self

from ragfolio.core.routing.base import Picks, RouteInputs, Scores, check_l, read_config, write_config

WEIGHTS_FILE = "router.safetensors"


class SavedRouter(ABC):
    """The save/load half of a router (:class:`~ragfolio.core.routing.base.RouterProtocol`)."""

    name: ClassVar[str]
    tensors: ClassVar[Literal["numpy", "torch", "none"]] = "numpy"  # "none": the config is all it holds
    members_: list[str]

    @abstractmethod
    def _check_fitted(self) -> None:
        """Raise ``RuntimeError`` when the router has not been fitted or loaded."""

    @abstractmethod
    def _route(self, inputs: RouteInputs, l: int) -> tuple[Picks, Scores]:  # noqa: E741 - members per query
        """:meth:`route` of a fitted router and an ``l`` in 1..k."""

    def checked_l(self, l: int) -> int:  # noqa: E741
        """``l`` after checking that the router is fitted and that ``1 <= l <= k``.

        Raises:
            RuntimeError: The router has not been fitted or loaded.
            ValueError: ``l`` is outside 1..k.
        """
        self._check_fitted()
        check_l(l, len(self.members_))
        return l

    def route(self, inputs: RouteInputs, l: int) -> tuple[Picks, Scores]:  # noqa: E741
        """``(picks, scores)``: the ``(n, l)`` members to run, best first, and the ``(n, k)`` scores
        they were ranked by (:meth:`_route`, after :meth:`checked_l`)."""
        return self._route(inputs, self.checked_l(l))

    @abstractmethod
    def _state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(config, arrays)``: what ``router.json`` holds besides the name, and the named arrays."""

    @classmethod
    @abstractmethod
    def _from_state(cls, config: Mapping[str, Any], arrays: Mapping[str, Any]) -> Self:
        """The router of a saved ``config`` and ``arrays`` (both as :meth:`_state` gave them)."""

    def save(self, folder: str | Path) -> None:
        """Write the router into ``folder`` (created if needed)."""
        self._check_fitted()
        config, arrays = self._state()
        path = write_config(folder, self.name, config)
        if self.tensors == "numpy":
            from safetensors.numpy import save_file

            save_file(arrays, str(path / WEIGHTS_FILE))
        elif self.tensors == "torch":
            from safetensors.torch import save_file as save_tensors

            save_tensors(arrays, str(path / WEIGHTS_FILE))

    @classmethod
    def load(cls, folder: str | Path) -> Self:
        """The router :meth:`save` wrote into ``folder``.

        Raises:
            FileNotFoundError: ``folder`` holds no ``router.json``, or no weights for a router that has them.
            ValueError: ``router.json`` names another router.
        """
        config = read_config(folder, cls.name)
        weights = Path(folder) / WEIGHTS_FILE
        if cls.tensors == "none":
            return cls._from_state(config, {})
        if not weights.is_file():
            raise FileNotFoundError(f"{weights} is missing: not a saved {cls.name} router")
        if cls.tensors == "numpy":
            from safetensors.numpy import load_file

            return cls._from_state(config, load_file(str(weights)))
        from safetensors.torch import load_file as load_tensors

        return cls._from_state(config, load_tensors(str(weights)))
