"""The corpora of a run and the one each dataset retrieves from.

``data_prep`` builds either one **union** corpus (every dataset's contexts, plus any passage
files) that every dataset retrieves from, or one corpus **per dataset**. :class:`Corpora` holds the
distinct corpora once each and maps every dataset to its corpus's name, so downstream steps build
one retrieval runner per distinct corpus, not one per dataset. Its JSON form
(``data/03_primary/corpora.json``) stores each corpus once::

    {"mode": "union" | "per_dataset",
     "datasets": {dataset: corpus name, ...},
     "corpora": {corpus name: [{"id", "title", "text"}, ...], ...}}

A passage with metadata (from a passage file, see :mod:`ragfolio.core.data.metadata`) carries a
fourth key, ``"metadata"``, in its record (:meth:`~ragfolio.core.data.records.Corpus.to_records`).

In ``union`` mode the single corpus is named ``"union"``; in ``per_dataset`` mode each corpus is
named after its dataset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from ragfolio.core.data.passages import Corpus

Mode = Literal["union", "per_dataset"]
UNION: Final = "union"
PER_DATASET: Final = "per_dataset"
MODES = (UNION, PER_DATASET)


@dataclass(frozen=True)
class Corpora:
    """Distinct corpora by name, and the corpus every dataset retrieves from.

    Attributes:
        mode: ``"union"`` (one corpus for every dataset) or ``"per_dataset"``.
        corpora: Corpus name -> corpus, each distinct corpus once.
        datasets: Dataset name -> the name of the corpus its questions retrieve from.
    """

    mode: Mode
    corpora: Mapping[str, Corpus]
    datasets: Mapping[str, str]

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode={self.mode!r} must be one of {MODES}")
        missing = {d: name for d, name in self.datasets.items() if name not in self.corpora}
        if missing:
            raise ValueError(f"datasets {missing} name corpora that are not among {sorted(self.corpora)}")

    @classmethod
    def union(cls, corpus: Corpus, datasets: Iterable[str]) -> Corpora:
        """Every dataset in ``datasets`` retrieves from the one ``corpus``."""
        return cls(UNION, {UNION: corpus}, {d: UNION for d in datasets})

    @classmethod
    def per_dataset(cls, corpora: Mapping[str, Corpus]) -> Corpora:
        """Each dataset retrieves from its own corpus (``{dataset: corpus}``)."""
        return cls(PER_DATASET, dict(corpora), {d: d for d in corpora})

    def name_for(self, dataset: str) -> str:
        """The name of the corpus ``dataset`` retrieves from.

        Raises:
            KeyError: ``dataset`` has no corpus (it was left out of retrieval), naming the known ones.
        """
        if dataset not in self.datasets:
            raise KeyError(f"dataset {dataset!r} has no corpus; datasets with one: {sorted(self.datasets)}")
        return self.datasets[dataset]

    def corpus_for(self, dataset: str) -> Corpus:
        """The corpus ``dataset``'s questions retrieve from."""
        return self.corpora[self.name_for(dataset)]

    def names_for(self, datasets: Iterable[str]) -> list[str]:
        """The distinct corpus names ``datasets`` retrieve from, in order of first use."""
        return list(dict.fromkeys(self.name_for(d) for d in datasets))

    def describe(self) -> dict[str, Any]:
        """What reports say about the corpus: the mode, fingerprint(s) and passage count(s).

        ``union``: ``{"mode", "fingerprint", "n_passages"}`` (the corpus every dataset retrieved
        from). ``per_dataset``: ``{"mode", "fingerprints": {dataset: ...}, "n_passages": {dataset:
        ...}}``, labelled per dataset since no single corpus was measured.
        """
        if self.mode == UNION:
            corpus = self.corpora[UNION]
            return {"mode": UNION, "fingerprint": corpus.fingerprint, "n_passages": len(corpus)}
        return {
            "mode": PER_DATASET,
            "fingerprints": {d: self.corpus_for(d).fingerprint for d in self.datasets},
            "n_passages": {d: len(self.corpus_for(d)) for d in self.datasets},
        }

    def to_dict(self) -> dict[str, Any]:
        """The JSON form described in the module docstring."""
        return {
            "mode": self.mode,
            "datasets": dict(self.datasets),
            "corpora": {name: corpus.to_records() for name, corpus in self.corpora.items()},
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Corpora:
        """Read the JSON form, building each distinct corpus once.

        Raises:
            ValueError: ``data`` is not in that form (e.g. an older ``{dataset: records}`` file).
        """
        if not {"mode", "datasets", "corpora"} <= set(data):
            raise ValueError(
                f"corpora JSON needs the keys 'mode', 'datasets' and 'corpora', got {sorted(data)[:5]}; "
                "a file written by an older ragfolio: rerun the data_prep pipeline"
            )
        corpora = {name: Corpus.from_records(records) for name, records in data["corpora"].items()}
        return cls(data["mode"], corpora, dict(data["datasets"]))
