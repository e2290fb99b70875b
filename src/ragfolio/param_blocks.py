"""Nested parameter blocks, checked like the rest of a stage's parameters: by the constructor they configure.

Some parameters are a block of keyword arguments handed on whole (``router_training.router`` to
the learned :class:`~ragfolio.core.routing.routers.learned.Router`, ``answering_evaluation.vendi_rag``
to :class:`~ragfolio_lab.answering.vendi_rag.VendiRAG`, ...). :func:`kwargs_model` derives a
strict pydantic model from the constructor's signature (its keyword parameters, their types and
defaults; ``extra="forbid"``), so a misspelt key or a wrong type fails when the parameters are
validated, naming the key, not later or never. :func:`checked_block` validates a block with it and
hands on the block as written (validation checks; it does not rewrite what the user gave);
:func:`kwargs_of` makes that the validator of a field::

    router: Annotated[dict[str, Any], kwargs_of(Router, "router_training.router")] = Field(default_factory=dict)
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Mapping
from typing import Any, get_type_hints

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError, create_model


@functools.cache
def kwargs_model(target: Callable[..., Any], skip: tuple[str, ...] = ()) -> type[BaseModel]:
    """A strict model of ``target``'s keyword parameters with defaults, less ``skip`` (those the node passes)."""
    hints = get_type_hints(target if dataclasses.is_dataclass(target) else target.__init__)
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(target).parameters.items():
        if name in skip or param.default is inspect.Parameter.empty or param.kind in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        fields[name] = (hints.get(name, Any), param.default)
    config = ConfigDict(extra="forbid", frozen=True, arbitrary_types_allowed=True)
    model: type[BaseModel] = create_model(f"{getattr(target, '__name__', 'Block')}Block", __config__=config, **fields)
    return model


def checked_block(model: type[BaseModel], block: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``block`` as given, after validating it with ``model``.

    Raises:
        ValueError: A key ``model`` does not know or a value of the wrong type, with the keys allowed.
    """
    try:
        model.model_validate(dict(block))
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
        raise ValueError(f"{where}: {problems} (keys allowed: {sorted(model.model_fields)})") from None
    return dict(block)


def kwargs_of(target: Callable[..., Any], where: str, skip: tuple[str, ...] = ()) -> AfterValidator:
    """The validator of a block field (in ``Annotated``): :func:`checked_block` by ``target``'s :func:`kwargs_model`."""
    return AfterValidator(lambda block: checked_block(kwargs_model(target, skip), block, where))
