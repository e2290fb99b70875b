"""Passage vectors cached one by one, keyed by the text an encoder sees and by the encoder's identity.

A corpus's embeddings cached whole (the pool runner's ``passage_embeddings`` entry) are lost to a
single added passage: adding 1,000 passages to 42,000 encoded all 43,000 again. This store keeps
each passage's vector under the sha256 of its text (:func:`passage_key`), in a folder per encoder
identity (:func:`~ragfolio.core.retrieval.encoders.kinds.encoder_identity`: settings, package versions,
declared code version, device), so :func:`encode_missing` encodes only the passages it has not seen
and reads the others back. It relies on an encoder's vector of a text not depending on the texts
encoded beside it, which ragfolio's encoders guarantee to the bit
(:func:`~ragfolio.core.retrieval.encoders.vectors.length_batches`).

Layout, under ``<cache root>/passage_vectors/<identity digest>/``::

    identity.json          the encoder identity, for a person reading the folder
    <shard>.npy            (n, dim) float32 vectors, rows in the order of:
    <shard>.keys           their n keys, one hex sha256 a line

Each write adds one shard; its ``.npy`` is written before its ``.keys``, each to a temporary file
renamed into place, so a reader sees only complete shards, and a shard is named by the digest of
its keys, so concurrent writers never clash. Past :data:`MAX_SHARDS` shards a write merges them into
one. Nothing is pickled. Vectors of passages no corpus holds any more stay (another corpus, or a
later revision, may hold them again); deleting the folder clears the store.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.cache import ArrayCache

logger = logging.getLogger(__name__)

Embedding = npt.NDArray[np.float32]

STORE_VERSION = 1  # the folder layout's; part of the identity digest
MAX_SHARDS = 32  # shards of one identity past which a write merges them into one
NAMESPACE = "passage_embeddings"  # the ArrayCache namespace whose settings the store follows
FOLDER = "passage_vectors"  # the store's folder under the cache root


def passage_key(text: str) -> str:
    """The store's key of a passage: the hex sha256 of the text the encoder is given."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def identity_digest(identity: Mapping[str, Any]) -> str:
    """24 hex digits naming an encoder identity's folder (the identity and :data:`STORE_VERSION`)."""
    blob = json.dumps({"identity": identity, "store": STORE_VERSION}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _write_atomically(path: Path, write: Callable[[Any], None]) -> None:
    """``write(handle)`` to a temporary file beside ``path``, then rename it to ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=path.suffix + ".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


class PassageVectorStore:
    """The vectors of one encoder identity, one per passage key (see the module docstring).

    Args:
        root: The store's folder (``<cache root>/passage_vectors``); created on the first write.
        identity: The encoder's identity; its digest (:func:`identity_digest`) names the subfolder.
        read_only: Look vectors up but write nothing.
    """

    def __init__(self, root: str | Path, identity: Mapping[str, Any], *, read_only: bool = False) -> None:
        self.identity = dict(identity)
        self.folder = Path(root) / identity_digest(self.identity)
        self.read_only = read_only

    def shards(self) -> list[str]:
        """Names of the complete shards (those whose ``.keys`` file exists), sorted."""
        return sorted(path.stem for path in self.folder.glob("*.keys"))

    def index(self) -> dict[str, tuple[str, int]]:
        """Every stored key -> ``(shard, row)``, read from the keys files (the first shard holding a key wins)."""
        found: dict[str, tuple[str, int]] = {}
        for shard in self.shards():
            for row, key in enumerate((self.folder / f"{shard}.keys").read_text().split()):
                found.setdefault(key, (shard, row))
        return found

    def __len__(self) -> int:
        return len(self.index())

    def find(self, keys: Sequence[str]) -> tuple[npt.NDArray[np.intp], Embedding | None]:
        """The positions in ``keys`` whose vectors are stored, and those vectors.

        Returns:
            ``(positions, vectors)``: ascending positions into ``keys``, and their ``(len(positions),
            dim)`` float32 vectors (None when none is stored).
        """
        try:
            return self._find(keys)
        except FileNotFoundError:  # another process merged shards between our index and our read: once more
            return self._find(keys)

    def _find(self, keys: Sequence[str]) -> tuple[npt.NDArray[np.intp], Embedding | None]:
        index = self.index()
        positions = np.array([i for i, key in enumerate(keys) if key in index], dtype=np.intp)
        if not len(positions):
            return positions, None
        by_shard: dict[str, tuple[list[int], list[int]]] = {}
        for slot, position in enumerate(positions.tolist()):
            shard, row = index[keys[position]]
            slots, rows = by_shard.setdefault(shard, ([], []))
            slots.append(slot)
            rows.append(row)
        vectors: Embedding | None = None
        for shard, (slots, rows) in by_shard.items():
            stored = np.load(self.folder / f"{shard}.npy", mmap_mode="r", allow_pickle=False)
            if vectors is None:
                vectors = np.empty((len(positions), stored.shape[1]), dtype=np.float32)
            if stored.shape[1] != vectors.shape[1]:
                raise ValueError(f"{self.folder / shard}.npy holds {stored.shape[1]}-d vectors, "
                                 f"another shard {vectors.shape[1]}-d: delete {self.folder} to rebuild it")
            vectors[slots] = stored[rows]
        return positions, vectors

    def add(self, keys: Sequence[str], vectors: npt.ArrayLike) -> None:
        """Store ``vectors`` (``(len(keys), dim)``, one row per key) as one new shard; keys already
        stored, and a read-only store, write nothing. Past :data:`MAX_SHARDS` shards, merges them."""
        rows = np.asarray(vectors, dtype=np.float32)
        if rows.ndim != 2 or len(rows) != len(keys):
            raise ValueError(f"vectors of shape {rows.shape} for {len(keys)} keys: expected ({len(keys)}, dim)")
        if self.read_only:
            return
        known, seen, fresh = self.index(), set(), []
        for i, key in enumerate(keys):  # each key once, if not stored yet
            if key not in known and key not in seen:
                seen.add(key)
                fresh.append(i)
        if not fresh:
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        if not (self.folder / "identity.json").exists():
            text = json.dumps(self.identity, sort_keys=True, indent=1, default=str).encode()
            _write_atomically(self.folder / "identity.json", lambda handle: handle.write(text))
        self._write_shard([keys[i] for i in fresh], rows[fresh])
        if len(self.shards()) > MAX_SHARDS:
            self.compact()

    def _write_shard(self, keys: list[str], rows: Embedding) -> str:
        """Write one shard (vectors first, keys last) and return its name."""
        text = "".join(f"{key}\n" for key in keys).encode()
        name = hashlib.sha256(text).hexdigest()[:20]
        _write_atomically(self.folder / f"{name}.npy", lambda handle: np.save(handle, rows, allow_pickle=False))
        _write_atomically(self.folder / f"{name}.keys", lambda handle: handle.write(text))
        return name

    def compact(self) -> None:
        """Merge every shard into one (each key once), then delete the merged ones."""
        if self.read_only:
            return
        shards = self.shards()
        if len(shards) < 2:
            return
        index = self.index()
        keys = list(index)
        try:
            positions, vectors = self._find(keys)
        except FileNotFoundError:  # another process is merging them
            logger.info("vector store %s: shards merged elsewhere meanwhile", self.folder)
            return
        if vectors is None or len(positions) != len(keys):
            return
        merged = self._write_shard(keys, vectors)
        for shard in shards:
            if shard != merged:
                (self.folder / f"{shard}.keys").unlink(missing_ok=True)  # unlisted first, then its vectors
                (self.folder / f"{shard}.npy").unlink(missing_ok=True)


def passage_store(cache: ArrayCache, identity: Mapping[str, Any] | None) -> PassageVectorStore | None:
    """The vector store of an encoder identity beside ``cache``, following its settings: None where
    the cache is disabled, serves :data:`NAMESPACE` from no disk, or the identity is unknown; read-only
    where the cache is."""
    if identity is None or not cache.enabled or (cache.namespaces is not None and NAMESPACE not in cache.namespaces):
        return None
    return PassageVectorStore(cache.root / FOLDER, identity, read_only=cache.read_only)


def encode_missing(
    texts: Sequence[str], encode: Callable[[list[str]], Embedding], store: PassageVectorStore | None, name: str
) -> Embedding:
    """``(len(texts), dim)`` vectors of ``texts`` in their order: stored ones read from ``store``, the
    others encoded by ``encode`` (each distinct text once) and added to it.

    Args:
        texts: What the encoder sees of each passage.
        encode: Texts -> their ``(n, dim)`` float32 vectors (an encoder's ``encode_passages``).
        store: Where vectors are kept between runs; None encodes every text.
        name: The encoder's name, for the log.
    """
    if store is None or not texts:
        logger.info("encoding %d of %d passages with %s (0 cached)", len(texts), len(texts), name)
        return np.asarray(encode(list(texts)), dtype=np.float32)
    keys = [passage_key(text) for text in texts]
    found, stored = store.find(keys)
    if stored is not None and len(found) == len(texts):
        logger.info("all %d passage vectors of %s from the vector store", len(texts), name)
        return stored
    missing = np.setdiff1d(np.arange(len(texts)), found)
    firsts: dict[str, int] = {}  # each distinct missing text's first position: encoded once
    for i in missing.tolist():
        firsts.setdefault(keys[i], i)
    logger.info("encoding %d of %d passages with %s (%d cached)", len(firsts), len(texts), name, len(found))
    fresh = np.asarray(encode([texts[i] for i in firsts.values()]), dtype=np.float32)
    if stored is not None and fresh.shape[1:] != stored.shape[1:]:
        raise ValueError(f"encoder {name!r} gives vectors of shape {fresh.shape[1:]}, "
                         f"its store {store.folder} holds {stored.shape[1:]}")
    store.add(list(firsts), fresh)
    out = np.empty((len(texts), fresh.shape[1]), dtype=np.float32)
    if stored is not None:
        out[found] = stored
    slot = {key: j for j, key in enumerate(firsts)}
    out[missing] = fresh[[slot[keys[i]] for i in missing.tolist()]]
    return out
