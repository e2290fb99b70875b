"""Query features for routing: hashed word and character n-grams of the raw text.

The router (:mod:`ragfolio.core.routing.routers.learned`) reads a query as a dict of feature blocks: ``"text"``,
the sparse hashed n-grams built here, plus one dense block per encoder of the pool (the query
embeddings the pool runner already computes and caches, so routing adds no encoding). Hashing
needs no fitted vocabulary, so the same query gives the same features at training and serving.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import scipy.sparse as sp
from sklearn.feature_extraction.text import HashingVectorizer

Features = dict[str, Any]  # block name -> (n, d) ndarray or scipy CSR matrix


@dataclass(frozen=True)
class TextHasher:
    """Hashed, L2-normalised word and character n-gram counts of a query.

    Attributes:
        n_features: Columns of each of the two blocks (word, char); the output has twice as many.
        word_ngrams: ``(min_n, max_n)`` word n-grams (question words and bigrams such as
            "which country" or "who was" tell question types apart).
        char_ngrams: ``(min_n, max_n)`` character n-grams within word boundaries (robust to
            spelling and morphology of entity names).
    """

    n_features: int = 2**12
    word_ngrams: tuple[int, int] = (1, 2)
    char_ngrams: tuple[int, int] = (3, 5)

    def __post_init__(self) -> None:
        if self.n_features < 16:
            raise ValueError(f"n_features={self.n_features} must be >= 16")

    @property
    def dim(self) -> int:
        return 2 * self.n_features

    def transform(self, texts: Sequence[str]) -> sp.csr_matrix:
        """``(n_texts, 2 * n_features)`` float32 CSR matrix: the word block, then the char block."""
        common = {"n_features": self.n_features, "alternate_sign": False, "dtype": np.float32, "lowercase": True}
        words = HashingVectorizer(analyzer="word", ngram_range=tuple(self.word_ngrams), **common)
        chars = HashingVectorizer(analyzer="char_wb", ngram_range=tuple(self.char_ngrams), **common)
        return sp.hstack([words.transform(texts), chars.transform(texts)], format="csr", dtype=np.float32)

    def to_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, config: Mapping[str, Any]) -> TextHasher:
        """The hasher of a (possibly partial) :meth:`to_dict` mapping; missing keys take the defaults."""
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in config.items()})  # type: ignore[arg-type]


def query_features(
    texts: Sequence[str], embeddings: Mapping[str, npt.NDArray[np.float32]], hasher: TextHasher
) -> Features:
    """The router's input for ``texts``: ``{"text": hashed n-grams, <encoder>: (n, dim) embeddings}``."""
    n = len(texts)
    for name, emb in embeddings.items():
        if len(emb) != n:
            raise ValueError(f"embeddings[{name!r}] has {len(emb)} rows for {n} queries")
    return {"text": hasher.transform(texts), **{name: np.asarray(e, dtype=np.float32) for name, e in embeddings.items()}}


def take_rows(features: Features, rows: npt.NDArray[np.int64] | Sequence[int]) -> Features:
    """The same blocks restricted to ``rows`` (works for dense arrays and CSR matrices)."""
    index = np.asarray(rows, dtype=np.int64)
    return {name: block[index] for name, block in features.items()}


def stack_rows(parts: Sequence[Features]) -> Features:
    """Concatenate the rows of several feature dicts with the same blocks."""
    if not parts:
        raise ValueError("nothing to stack")
    names = list(parts[0])
    for part in parts[1:]:
        if list(part) != names:
            raise ValueError(f"feature blocks differ: {names} vs {list(part)}")
    return {
        name: sp.vstack([p[name] for p in parts], format="csr")
        if sp.issparse(parts[0][name])
        else np.concatenate([p[name] for p in parts], axis=0)
        for name in names
    }


def n_rows(features: Features) -> int:
    """Number of queries in a feature dict (all blocks must agree)."""
    sizes = {name: block.shape[0] for name, block in features.items()}
    if len(set(sizes.values())) != 1:
        raise ValueError(f"feature blocks have different row counts: {sizes}")
    return next(iter(sizes.values()))


def design_matrix(features: Features) -> sp.csr_matrix:
    """Every block side by side, sorted by name (as the learned router reads them), as one CSR matrix."""
    return sp.hstack([sp.csr_matrix(features[name]) for name in sorted(features)], format="csr")
