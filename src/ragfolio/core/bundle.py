"""The portfolio bundle: what the pipeline writes and what the service and the MLflow model load.

A bundle is an inspectable folder; nothing in it is a pickle::

    manifest.json        members, parameters, selection metrics, the corpus's size and fingerprint,
                         per-file sha256 and the checksum
    corpus.jsonl         the passages served ({"id", "title", "text"} per line, and "metadata" on
                         the passages that have it, for filtering)
    router/              the router's folder: router.json (naming its kind) and any weights
    embeddings/<enc>.npy the corpus embeddings of every encoder the members and router read
    indexes/<kind>-<i>/  every corpus index the service searches (BM25, FAISS, passage graphs),
                         built once by the pipeline, each in its library's own format
    (manifest "reader")  the reader answers are made with: the LLM and the answerer's limits
                         (:class:`~ragfolio.core.llm.reader.ReaderSettings`, from ``packaging.reader``)
    cross_encoder/       the trained cross-encoder's folder, when a member is of the ``cross_encoder``
                         family or the routing features judge the members' lists with it
                         (``scoring.cross_encoder`` then names it relative to the bundle)

Packaging writes one bundle per portfolio key (``06_models/bundles/<key>/``) and, beside them, a
pointer to the served one (``06_models/served.json``, :func:`save_served`: ``{"portfolio": <key>,
"bundle": "bundles/<key>"}``), not a copy. :func:`resolve_bundle` is the one way from what a
user names (a bundle folder, that pointer, or a folder holding it) to the bundle's folder.

The checksum is the sha256 of the manifest without its ``checksum`` field, and the manifest lists
the sha256 of every file, so changing any byte of the bundle is caught by :func:`load_bundle`
(:class:`BundleIntegrityError` names the file). ``version`` is the checksum's first 12 hex digits:
two bundles with the same content have the same version. ``corpus.fingerprint`` is the served
corpus's :attr:`~ragfolio.core.data.records.Corpus.fingerprint`, the name the pipeline's reports give the
corpus they measured; :func:`load_bundle` checks the corpus it reads has it. ``router`` names the
router's kind (:mod:`ragfolio.core.routing.registry`); :func:`load_bundle` loads that kind (a
manifest without it, from before routers had names, holds the learned router).

A bundle loads memory-mapped by default (``mmap``): the embeddings and the indexes' arrays stay
in the page cache, shared with other processes, and only the pages a query touches become
resident, so a million-passage bundle is ready in seconds (docs/benchmarks.md, "A million
passages"). The manifest's ``indexes`` lists each index's kind, settings and folder
(:class:`~ragfolio.core.retrieval.indexes.corpus_index.CorpusIndex`); a format-1 bundle (before indexes
were saved) still loads, and the service builds its indexes at start-up as it did then.

This module is the format only: it imports no encoder or LLM, the index classes only to save and
load them, and a router's class only when :func:`load_bundle` loads one. The runtime is built from a bundle by
:meth:`ragfolio.core.system.routed_system.RoutedSystem.from_bundle` (and
:meth:`PortfolioBundle.runner` for retrieval alone).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from ragfolio.core.cache import ArrayCache, file_sha256
from ragfolio.core.data.passages import Corpus
from ragfolio.core.folder_swap import replace_folder
from ragfolio.core.llm.reader import ReaderSettings
from ragfolio.core.retrieval.indexes.corpus_index import CorpusIndex
from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.core.routing.base import LEARNED, RouterProtocol
from ragfolio.core.routing.features.router_features import RouterFeatures

if TYPE_CHECKING:
    from ragfolio.core.retrieval.running.pool_runner import PoolRunner
    from ragfolio.core.scoring.runners import PoolSettings

FORMAT = 2  # 2: indexes/ and the manifest's "indexes"
FORMATS = (1, 2)  # formats load_bundle reads
MANIFEST = "manifest.json"
# The living corpus's folder (the update log a service writes ahead of every document it adds or
# deletes, :mod:`ragfolio.core.corpus.wal`), see live_folder: not part of the bundle, never checksummed.
LIVE_FOLDER = "live"


def live_folder(bundle_folder: str | Path) -> Path:
    """Where the service keeps a bundle's update log: outside the pipeline's outputs, so a rerun that
    rebuilds the bundle keeps it and DVC does not see its output changed.

    Packaging's bundles (``06_models/bundles/<key>``): ``06_models/live/<key>``. A bundle folder
    elsewhere (one copied, or written by hand): its own ``live/`` subfolder, which
    :func:`verify_bundle` does not count as part of it.
    """
    folder = Path(bundle_folder)
    if folder.parent.name == "bundles":
        return folder.parent.parent / LIVE_FOLDER / folder.name
    return folder / LIVE_FOLDER
CORPUS = "corpus.jsonl"
ROUTER = "router"
EMBEDDINGS = "embeddings"
CROSS_ENCODER = "cross_encoder"
INDEXES = "indexes"
SERVED = "served.json"  # packaging's pointer to the served bundle (save_served, resolve_bundle)
SELECTOR_SEED = 42  # a manifest without selector_seed: the seed answering evaluation measured with then


class BundleIntegrityError(ValueError):
    """A bundle file is missing, unexpected, or differs from its recorded checksum."""


@dataclass(frozen=True)
class PortfolioBundle:
    """A trained portfolio and router over the corpus they serve.

    Attributes:
        name: The portfolio's key (a dataset name, or ``all``).
        corpus: The passages served.
        members: The portfolio's members, in the router's member order.
        router: The fitted router (any registered kind; its ``name`` is stored in the manifest).
        scoring: The ``candidate_scoring`` settings the members ran with
            (:class:`~ragfolio.core.scoring.runners.PoolSettings`: ``num_docs``, ``prefilter_depth``,
            ``bm25_base``, ``graph_max_degree``, ``encoders``, ``score``, ``family_modules``).
        routing: The router's inputs (:class:`~ragfolio.core.routing.features.router_features.RouterFeatures`).
        embeddings: ``(n_passages, dim)`` float32 corpus embeddings by encoder name.
        default_l: Members a query is routed to when the caller does not say (router training's choice:
            the smallest routed l, else ``bundle.default_l``; :mod:`ragfolio.core.routing.judging.choice`).
        routed_ls: The l's at which the router routes (``router_training``'s do-no-harm rule,
            :mod:`ragfolio.core.routing.judging.choice`, then packaging's do no harm on answers,
            :mod:`ragfolio.core.answering.answer_check`); a request for any other l is served by the
            single best member alone. None: the router routes at every l.
        wide_ls: The unrouted l's at which the single best member gives ``l * num_docs`` passages
            (one wide prompt); at any other unrouted l it gives ``num_docs``. None: every unrouted l
            is wide (a bundle packaged before the answer check).
        single_best: The member with the best train mean (index into ``members``): what serves
            the l's the router does not.
        selection: The metrics the members were selected with (train ``F`` per prefix, test best-of-k).
        selector_seed: Seed of the order the selector is shown the candidate answers in
            (:class:`~ragfolio.core.answering.answerer.Answerer`'s ``seed``): answering evaluation
            and the service both answer with it, so at l >= 2 the service shows the candidates in
            the order that was evaluated.
        reader: The LLM and the answerer's limits the service, the MLflow model and answering
            evaluation answer with (a bundle written without one: the defaults).
        indexes: The corpus indexes the service searches, built
            (:func:`ragfolio.core.system.bundle_indexes.with_indexes`); empty: the service builds them at start-up.
        manifest: The manifest as stored (set by :func:`load_bundle`; holds ``version`` and ``checksum``).
    """

    name: str
    corpus: Corpus
    members: list[CandidateSpec]
    router: RouterProtocol
    scoring: PoolSettings
    routing: RouterFeatures
    embeddings: dict[str, npt.NDArray[np.float32]]
    default_l: int = 1
    routed_ls: tuple[int, ...] | None = None
    wide_ls: tuple[int, ...] | None = None
    single_best: int = 0
    selection: dict[str, Any] = field(default_factory=dict)
    selector_seed: int = SELECTOR_SEED
    reader: ReaderSettings = field(default_factory=ReaderSettings)
    indexes: list[CorpusIndex] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if [m.name for m in self.members] != list(self.router.members_):
            raise ValueError("the members differ from the router's members (names and order must match)")
        if not 1 <= self.default_l <= len(self.members):
            raise ValueError(f"default_l={self.default_l} must be in 1..{len(self.members)}")
        if not 0 <= self.single_best < len(self.members):
            raise ValueError(f"single_best={self.single_best} is not a member index (0..{len(self.members) - 1})")
        for name, ls in (("routed_ls", self.routed_ls), ("wide_ls", self.wide_ls)):
            if ls is not None and not set(ls) <= set(range(1, len(self.members) + 1)):
                raise ValueError(f"{name}={list(ls)} must be l's in 1..{len(self.members)}")

    def routes_at(self, l: int) -> bool:  # noqa: E741 - members per query
        """Whether a request for ``l`` members is routed (else the single best member serves it)."""
        return self.routed_ls is None or l in self.routed_ls

    def runner(self, *, num_docs: int | None = None, max_query_batches: int = 256) -> PoolRunner:
        """A pool runner over the bundle's corpus, with its embeddings and indexes, configured as
        candidate scoring ran the members (``num_docs`` overridable): it encodes no passage, builds
        no index the bundle holds and writes nothing to disk."""
        config = self.scoring.runner_config(ArrayCache(tempfile.gettempdir(), enabled=False), num_docs)
        metadata = (self.corpus.ids, self.corpus.metadata) if self.corpus.metadata else None
        return config.build(self.corpus.titles, self.corpus.texts, max_query_batches=max_query_batches,
                            passage_embeddings=self.embeddings, indexes=self.indexes, passage_metadata=metadata)

    @property
    def k(self) -> int:
        return len(self.members)

    @property
    def version(self) -> str:
        return str(self.manifest.get("version", ""))

    @property
    def checksum(self) -> str:
        return str(self.manifest.get("checksum", ""))


def _manifest_checksum(manifest: Mapping[str, Any]) -> str:
    body = {k: v for k, v in manifest.items() if k not in ("checksum", "version")}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _ragfolio_version() -> str:
    try:
        return version("ragfolio")
    except PackageNotFoundError:  # running from a source tree that is not installed
        return "unknown"


def _checksums(folder: Path, files: list[Path]) -> dict[str, str]:
    """The sha256 of each file by its path in ``folder`` (hashed in two threads: hashlib releases the GIL)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(zip((p.relative_to(folder).as_posix() for p in files), pool.map(file_sha256, files), strict=True))


def save_bundle(bundle: PortfolioBundle, path: str | Path) -> dict[str, Any]:
    """Write ``bundle`` to the folder ``path`` (replacing it) and return the manifest written.

    The folder is written next to ``path`` and renamed into place, so a reader never sees half a bundle.
    """

    def write(tmp: Path) -> dict[str, Any]:
        with (tmp / CORPUS).open("w", encoding="utf-8") as handle:
            for record in bundle.corpus.to_records():
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        from ragfolio.core.routing.registry import save_router  # the routers' runtime, only when one is saved

        save_router(bundle.router, tmp / ROUTER)
        (tmp / EMBEDDINGS).mkdir()
        for name, emb in bundle.embeddings.items():
            np.save(tmp / EMBEDDINGS / f"{name}.npy", np.ascontiguousarray(emb, dtype=np.float32), allow_pickle=False)
        indexes = []
        for i, index in enumerate(bundle.indexes):
            folder = f"{INDEXES}/{index.kind}-{i}"
            index.save(tmp / folder)
            indexes.append({"kind": index.kind, "key": index.key, "path": folder})
        scoring = bundle.scoring.to_dict()
        scoring.pop("cross_encoder_folds", None)  # a bundle serves the full model: the folds score train questions
        judges = bundle.routing.retrieval_features is not None and bundle.routing.retrieval_features.judge
        if scoring.pop("cross_encoder", None) and (judges or any(m.family == "cross_encoder" for m in bundle.members)):
            shutil.copytree(str(bundle.scoring.cross_encoder), tmp / CROSS_ENCODER)  # members or routing score with it
            scoring["cross_encoder"] = CROSS_ENCODER
        files = sorted(p for p in tmp.rglob("*") if p.is_file())
        manifest: dict[str, Any] = {
            "format": FORMAT,
            "ragfolio_version": _ragfolio_version(),
            "name": bundle.name,
            "k": bundle.k,
            "router": bundle.router.name,
            "default_l": bundle.default_l,
            "routed_ls": None if bundle.routed_ls is None else list(bundle.routed_ls),
            "wide_ls": None if bundle.wide_ls is None else list(bundle.wide_ls),
            "single_best": bundle.single_best,
            "members": [m.to_record() for m in bundle.members],
            "scoring": scoring,
            "routing": bundle.routing.to_dict(),
            "selection": bundle.selection,
            "selector_seed": bundle.selector_seed,
            "reader": bundle.reader.to_dict(),
            "corpus": {"n_passages": len(bundle.corpus), "fingerprint": bundle.corpus.fingerprint},
            "indexes": indexes,
            "files": _checksums(tmp, files),
        }
        manifest["checksum"] = _manifest_checksum(manifest)
        manifest["version"] = manifest["checksum"][:12]
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1))
        return manifest

    return replace_folder(path, write)


def verify_bundle(path: str | Path) -> dict[str, Any]:
    """The manifest of the bundle at ``path`` after checking every file against it.

    Raises:
        FileNotFoundError: ``path`` holds no manifest.
        BundleIntegrityError: A file is missing, unlisted or altered, or the manifest was edited.
    """
    folder = Path(path)
    if not (folder / MANIFEST).is_file():
        raise FileNotFoundError(f"{folder / MANIFEST} is missing: not a ragfolio bundle (run the packaging pipeline)")
    manifest = json.loads((folder / MANIFEST).read_text())
    if manifest.get("format") not in FORMATS:
        raise BundleIntegrityError(f"{folder / MANIFEST}: bundle format {manifest.get('format')!r}, "
                                   f"this ragfolio reads {list(FORMATS)}")
    if _manifest_checksum(manifest) != manifest.get("checksum"):
        raise BundleIntegrityError(f"{folder / MANIFEST} does not match its recorded checksum (was it edited?)")
    present = {p.relative_to(folder).as_posix() for p in folder.rglob("*")
               if p.is_file() and p.relative_to(folder).parts[0] != LIVE_FOLDER} - {MANIFEST}
    listed = set(manifest["files"])
    if missing := sorted(listed - present):
        raise BundleIntegrityError(f"{folder / missing[0]} is listed in the manifest but missing")
    if extra := sorted(present - listed):
        raise BundleIntegrityError(f"{folder / extra[0]} is not part of the bundle (not in the manifest)")
    names = sorted(listed)
    actual = _checksums(folder, [folder / name for name in names])
    for name in names:
        if actual[name] != manifest["files"][name]:
            raise BundleIntegrityError(f"{folder / name} does not match its recorded sha256 checksum")
    return manifest


def save_served(path: str | Path, bundle: str | Path, portfolio: str) -> None:
    """Write the pointer file ``path`` naming the bundle folder ``bundle`` (portfolio ``portfolio``'s)
    as the served one; it records the folder relative to the pointer's own, so the pair moves together."""
    pointer, folder = Path(path), Path(bundle)
    relative = Path(os.path.relpath(folder, pointer.parent)).as_posix()
    pointer.parent.mkdir(parents=True, exist_ok=True)
    pointer.write_text(json.dumps({"portfolio": portfolio, "bundle": relative}, indent=1) + "\n")


def resolve_bundle(path: str | Path) -> Path:
    """The bundle folder ``path`` names: a bundle folder (it holds ``manifest.json``) as it is; a
    pointer file (:func:`save_served`: packaging's ``06_models/served.json``) or a folder holding one
    (``06_models``) as the bundle it points at. Anything else is returned as it is, for
    :func:`load_bundle` to say it holds no bundle.

    Raises:
        FileNotFoundError: The pointer names a folder that holds no bundle.
        ValueError: The file is not a pointer (no ``bundle`` entry).
    """
    target = Path(path)
    if target.is_dir() and not (target / MANIFEST).is_file() and (target / SERVED).is_file():
        target = target / SERVED
    if not target.is_file():
        return target
    pointer = json.loads(target.read_text())
    if not isinstance(pointer, dict) or not isinstance(pointer.get("bundle"), str):
        raise ValueError(f"{target} is not a served-bundle pointer (no 'bundle' entry): name a bundle folder or the "
                         f"{SERVED} the packaging pipeline writes")
    folder = target.parent / pointer["bundle"]
    if not (folder / MANIFEST).is_file():
        raise FileNotFoundError(f"{target} names {folder} (portfolio {pointer.get('portfolio')!r}), which holds no "
                                "bundle: run the packaging pipeline")
    return folder


def _check_corpus(corpus: Corpus, manifest: Mapping[str, Any], path: Path) -> None:
    """Raise if ``corpus`` is not the one the manifest names (size and fingerprint)."""
    expected = manifest.get("corpus", {})
    if "fingerprint" not in expected:
        raise BundleIntegrityError(f"{path.parent / MANIFEST} names no corpus fingerprint (a bundle from an older "
                                   "ragfolio): rebuild it with the packaging pipeline")
    if expected["fingerprint"] != corpus.fingerprint or expected.get("n_passages") != len(corpus):
        raise BundleIntegrityError(
            f"{path}: corpus of {len(corpus)} passages with fingerprint {corpus.fingerprint}, but the manifest names "
            f"{expected.get('n_passages')} passages with fingerprint {expected['fingerprint']}"
        )


def _pool_settings(stored: dict[str, Any], folder: Path) -> PoolSettings:
    """The manifest's ``scoring`` (its cross-encoder in ``folder``); a bundle written before it held
    ``score`` measured support recall."""
    from ragfolio.core.scoring.runners import PoolSettings  # the runners' module, only when a bundle is loaded

    if stored.get("cross_encoder"):
        stored = {**stored, "cross_encoder": str(folder / stored["cross_encoder"])}
    return PoolSettings.from_dict({"score": "support_recall", **stored})


def load_bundle(path: str | Path, *, verify: bool = True, mmap: bool = True) -> PortfolioBundle:
    """The bundle saved at ``path``; with ``verify`` (the default) every file is checked first.

    The corpus is checked against the manifest's ``corpus.fingerprint`` even without ``verify``.
    ``mmap`` maps the embeddings and the indexes' arrays (read-only) instead of reading them.

    Raises:
        BundleIntegrityError: A file differs from the manifest (see :func:`verify_bundle`), or the
            corpus read is not the one the manifest names.
    """
    folder = Path(path)
    manifest = verify_bundle(folder) if verify else json.loads((folder / MANIFEST).read_text())
    with (folder / CORPUS).open(encoding="utf-8") as handle:
        records = [json.loads(line) for line in handle if line.strip()]
    corpus = Corpus.from_records(records)
    _check_corpus(corpus, manifest, folder / CORPUS)
    embeddings = {
        p.stem: np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
        for p in sorted((folder / EMBEDDINGS).glob("*.npy"))
    }
    indexes = [CorpusIndex.load(entry["kind"], entry["key"], folder / entry["path"], mmap=mmap)
               for entry in manifest.get("indexes", [])]
    from ragfolio.core.routing.registry import load_router  # the routers' runtime, only when one is loaded

    router = load_router(folder / ROUTER)  # a user's router: the module its router.json records is imported
    if router.name != manifest.get("router", LEARNED):
        raise ValueError(f"{folder / ROUTER} holds a {router.name!r} router; the manifest names {manifest.get('router')!r}")
    return PortfolioBundle(
        name=manifest["name"], corpus=corpus, members=[CandidateSpec.from_record(r) for r in manifest["members"]],
        router=router, scoring=_pool_settings(manifest["scoring"], folder), routing=RouterFeatures.from_dict(manifest["routing"]),
        embeddings=embeddings, default_l=int(manifest["default_l"]),
        routed_ls=None if manifest.get("routed_ls") is None else tuple(manifest["routed_ls"]),
        wide_ls=None if manifest.get("wide_ls") is None else tuple(manifest["wide_ls"]),
        single_best=int(manifest.get("single_best", 0)), selection=manifest["selection"],
        selector_seed=int(manifest.get("selector_seed", SELECTOR_SEED)), indexes=indexes, manifest=manifest,
        reader=ReaderSettings.from_dict(manifest["reader"]) if "reader" in manifest else ReaderSettings(),
    )
