"""The reader a bundle is answered with: the LLM and the answerer's prompt limits, as one record.

Packaging writes it into every bundle (the manifest's ``reader``) from one parameter block,
``packaging.reader``; ``bentoml serve`` answers with the bundle's (``serving.yml``'s ``llm`` and
``answerer`` only override it, key by key: :meth:`ReaderSettings.overridden`), the MLflow model
records it, and answering evaluation answers with it: the reader that is evaluated is the one
that is served. A bundle written before bundles carried a reader has :class:`ReaderSettings`'
defaults (the embedded reader, the answerer's own limits).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ragfolio.core.llm.backend_config import EMBEDDED_LLM, backend_settings


def merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` laid over it key by key: mappings merge, anything else replaces.

    Returns:
        A new dict; neither argument is changed.
    """
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass(frozen=True)
class ReaderSettings:
    """The reader: which LLM answers, and how long its prompts and replies may be.

    Attributes:
        llm: A :func:`~ragfolio.core.llm.backends.make_backend` config: ``kind`` and the settings of
            each kind in a block of its own (model, endpoint, ``timeout_s``, ``max_retries``, threads, ...).
        answerer: Keyword arguments of :class:`~ragfolio.core.answering.answerer.Answerer`
            (``max_answer_tokens``, ``max_selector_tokens``, ``max_passage_words``, ``abstain``,
            ``min_confidence``); its ``seed``
            is the bundle's ``selector_seed``, not a reader setting.

    Raises:
        ValueError: ``llm`` names an unknown kind, or keys its kind does not have (named).
    """

    llm: dict[str, Any] = field(default_factory=lambda: dict(EMBEDDED_LLM))
    answerer: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        backend_settings(self.llm)  # the kind and its keys, as make_backend will read them; loads nothing

    def overridden(self, llm: Mapping[str, Any] | None = None, answerer: Mapping[str, Any] | None = None) -> ReaderSettings:
        """These settings with ``llm`` and ``answerer`` laid over them key by key (:func:`merge`;
        None: as they are), e.g. ``llm={"kind": "openai", "openai": {"base_url": ...}}``."""
        return ReaderSettings(merge(self.llm, llm or {}), merge(self.answerer, answerer or {}))

    def to_dict(self) -> dict[str, Any]:
        return {"llm": dict(self.llm), "answerer": dict(self.answerer)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReaderSettings:
        return cls(dict(data["llm"]), dict(data.get("answerer") or {}))
