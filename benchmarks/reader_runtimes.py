"""Which llama.cpp wheel reads and writes fastest on this CPU? (issue 50)

The embedded reader (Qwen2.5-Coder-1.5B-Instruct, Q4_K_M) on the same answer prompts with each
runtime, greedy: prefill and generation tokens/s, and whether the output is cyllama 0.2.18's (the
project's). Each runtime has its own venv; this script is the driver and each venv's worker.

- The driver (the project's venv, ``PYTHONPATH=src``) builds the prompts as the reader does
  (:func:`ragfolio.core.answering.prompts.answer_messages` over the first ``--prompts`` HotpotQA
  rows, their two supporting passages then two others; the GGUF's chat template applied by
  :class:`~ragfolio.core.llm.native.LlamaCppBackend`, tokenised as it does), starts one worker per
  runtime, and runs ``--passes`` passes, each asking every worker in turn for the five prompts (over
  several passes, a change in the machine's load falls on every runtime).
- A worker (a runtime's venv, stdlib and the runtime only) loads the model once and, per prompt,
  decodes the reference token ids in batches of 512 with ``n_threads_batch=2`` and samples the first
  token greedily (prefill: prompt tokens / time to first token), then generates up to ``--tokens``
  tokens with ``n_threads=1`` and again with ``n_threads=2`` (generation: tokens after the first /
  time after the first). cyllama and llama-cpp-cffi keep the prompt's KV cache and only drop the
  generated tokens between the two; xllamacpp (llama.cpp's server, threads fixed per server) runs
  one server per setting and reads each prompt twice, so its prefill is measured twice. A generation
  stops after ``--gen-cap-s`` seconds (two generation threads on two busy cores can crawl); only the
  first ``--gen2-passes`` passes generate with two threads; no pass starts that would end past
  ``--budget-s`` (its estimate: the last pass's time).

Each figure is the median over passes of (sum over prompts of tokens / sum of seconds), after one
warm-up (the first prompt's first 64 tokens) per runtime and setting. Run from the repository root
(the venvs as docs/results_issue50/runtimes.md installs them)::

    PYTHONPATH=src .venv/bin/python benchmarks/reader_runtimes.py \\
        --runtime cyllama=/work/rt/cyllama/bin/python \\
        --runtime "cyllama+passive=/work/rt/cyllama/bin/python OMP_WAIT_POLICY=PASSIVE" \\
        --runtime xllamacpp=/work/rt/xllamacpp/bin/python --runtime llama-cpp-cffi=/work/rt/llama-cpp-cffi/bin/python \\
        --out docs/results_issue50/runtimes.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

N_CTX, N_BATCH, BATCH_THREADS, GEN_THREADS = 4096, 512, 2, (1, 2)
# A worker's job comes in the environment, its command line is bare: on this shared machine another
# job's pattern kill (SIGTERM) twice ended workers whose command lines named the GGUF.
WORKER_ENV = "READER_RUNTIMES_JOB"


# --- workers: run in a runtime's venv; import nothing of ragfolio -------------------------------
class Cyllama:
    """cyllama's llama.cpp bindings, used as src/ragfolio/core/llm/native.py uses them."""

    def __init__(self, path: str) -> None:
        import cyllama.llama.llama_cpp as cy

        self.cy = cy
        cy.disable_logging()
        cy.ggml_backend_load_all()
        self.model = cy.LlamaModel(path, cy.LlamaModelParams())
        params = cy.LlamaContextParams()
        params.n_ctx, params.n_batch, params.no_perf = N_CTX, N_BATCH, True
        params.n_threads, params.n_threads_batch = GEN_THREADS[0], BATCH_THREADS
        self.ctx = cy.LlamaContext(self.model, params)
        self.vocab = self.model.get_vocab()

    def info(self) -> dict[str, Any]:
        from importlib.metadata import version

        return {"version": version("cyllama"), "llama_cpp": f"ggml {self.cy.ggml_version()} ({self.cy.ggml_commit()})",
                "flash_attn": "auto (-1)"}

    def tokenize(self, text: str) -> list[int]:
        return list(self.vocab.tokenize(text, add_special=True, parse_special=True))

    def detokenize(self, ids: list[int]) -> str:
        return str(self.vocab.detokenize(ids, text_len_max=8 * len(ids) + 64)) if ids else ""

    def drop_from(self, position: int) -> None:
        self.ctx.memory_seq_rm(0, position, -1)

    def set_threads(self, n_threads: int) -> None:
        self.ctx.set_n_threads(n_threads, BATCH_THREADS)

    def decode(self, tokens: list[int], position: int) -> None:
        self.ctx.decode(self.cy.llama_batch_get_one(tokens, position))

    def greedy(self) -> Any:
        sampler = self.cy.LlamaSampler(self.cy.LlamaSamplerChainParams())
        sampler.add_greedy()
        return lambda: sampler.sample(self.ctx, -1)

    def is_eog(self, token: int) -> bool:
        return bool(self.vocab.is_eog(token))


class LlamaCppCffi(Cyllama):
    """llama-cpp-cffi's CPU extension: llama.h through cffi. Its package ``__init__`` imports
    transformers and huggingface_hub, so the extension module is loaded on its own."""

    def __init__(self, path: str) -> None:
        import importlib.util
        import site
        import types

        sys.modules["llama"] = types.ModuleType("llama")  # the package, without its __init__
        so = next(Path(site.getsitepackages()[0], "llama").glob("_llama_cpp_cpu*.so"))
        spec = importlib.util.spec_from_file_location("llama._llama_cpp_cpu", so)
        module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        self.so, self.lib, self.ffi = so, module.lib, module.ffi
        lib = self.lib
        lib.llama_backend_init()
        self.model = lib.llama_model_load_from_file(path.encode(), lib.llama_model_default_params())
        params = lib.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch, params.no_perf = N_CTX, N_BATCH, N_BATCH, True
        params.n_threads, params.n_threads_batch = GEN_THREADS[0], BATCH_THREADS
        params.flash_attn = True  # as cyllama's "auto" resolves on a CPU
        self.ctx = lib.llama_init_from_model(self.model, params)
        self.vocab = lib.llama_model_get_vocab(self.model)

    def info(self) -> dict[str, Any]:
        import ctypes
        from importlib.metadata import version

        so = ctypes.CDLL(str(self.so))
        build = ctypes.c_int.in_dll(so, "LLAMA_BUILD_NUMBER").value
        commit = ctypes.c_char_p.in_dll(so, "LLAMA_COMMIT").value
        return {"version": version("llama-cpp-cffi"), "llama_cpp": f"b{build} ({commit.decode() if commit else '?'})",
                "flash_attn": "on (set)"}

    def tokenize(self, text: str) -> list[int]:
        raw = text.encode()
        out = self.ffi.new("llama_token[]", len(raw) + 8)
        n = self.lib.llama_tokenize(self.vocab, raw, len(raw), out, len(raw) + 8, True, True)
        return list(out[0:n])

    def detokenize(self, ids: list[int]) -> str:
        size = 8 * len(ids) + 64
        out = self.ffi.new("char[]", size)
        n = self.lib.llama_detokenize(self.vocab, self.ffi.new("llama_token[]", ids), len(ids), out, size, False, False)
        return bytes(self.ffi.buffer(out, n)).decode(errors="replace")

    def drop_from(self, position: int) -> None:
        self.lib.llama_kv_cache_seq_rm(self.ctx, 0, position, -1)

    def set_threads(self, n_threads: int) -> None:
        self.lib.llama_set_n_threads(self.ctx, n_threads, BATCH_THREADS)

    def decode(self, tokens: list[int], position: int) -> None:  # positions follow the cache (b4589's API)
        held = self.ffi.new("llama_token[]", tokens)
        if self.lib.llama_decode(self.ctx, self.lib.llama_batch_get_one(held, len(tokens))) != 0:
            raise RuntimeError(f"llama_decode failed at position {position}")

    def greedy(self) -> Any:
        chain = self.lib.llama_sampler_chain_init(self.lib.llama_sampler_chain_default_params())
        self.lib.llama_sampler_chain_add(chain, self.lib.llama_sampler_init_greedy())
        return lambda: self.lib.llama_sampler_sample(chain, self.ctx, -1)

    def is_eog(self, token: int) -> bool:
        return bool(self.lib.llama_vocab_is_eog(self.vocab, token))


def _direct_run(rt: Cyllama, tokens: list[int], max_tokens: int, cap_s: float, settings: tuple[int, ...]) -> dict[str, Any]:
    """Prefill once, then generate with each thread count of ``settings`` from the same cache (each
    generation stops after ``max_tokens`` tokens, an end-of-generation token, or ``cap_s`` seconds)."""
    rt.set_threads(GEN_THREADS[0])
    rt.drop_from(0)
    start = time.perf_counter()
    for i in range(0, len(tokens), N_BATCH):
        rt.decode(tokens[i:i + N_BATCH], i)
    first = rt.greedy()()
    out: dict[str, Any] = {"n_prompt": len(tokens), "prefill_s": time.perf_counter() - start}
    for n_threads in settings:
        rt.drop_from(len(tokens))
        rt.set_threads(n_threads)
        sample, ids, position = rt.greedy(), [first], len(tokens)
        start = time.perf_counter()
        while len(ids) < max_tokens and not rt.is_eog(ids[-1]) and time.perf_counter() - start < cap_s:
            rt.decode([ids[-1]], position)
            position += 1
            ids.append(sample())
        ids = ids[:-1] if rt.is_eog(ids[-1]) else ids
        out[f"gen{n_threads}"] = {"s": time.perf_counter() - start, "n": len(ids), "ids": ids, "text": rt.detokenize(ids)}
    return out


class Xllamacpp:
    """xllamacpp: llama.cpp's own server in-process, one per generation thread count."""

    def __init__(self, path: str) -> None:
        import xllamacpp as xlc

        self.xlc, self.servers = xlc, {}
        for n_threads in GEN_THREADS:
            params = xlc.CommonParams()
            params.model.path, params.n_gpu_layers = path, 0
            params.n_ctx, params.n_batch, params.n_ubatch, params.n_parallel = N_CTX, N_BATCH, N_BATCH, 1
            params.cpuparams.n_threads, params.cpuparams_batch.n_threads = n_threads, BATCH_THREADS
            params.cache_ram_mib = 0  # no host-memory prompt cache either
            self.servers[n_threads] = xlc.Server(params)

    def info(self) -> dict[str, Any]:
        import ctypes

        so = ctypes.CDLL(self.xlc.xllamacpp.__file__)
        so.ggml_version.restype = ctypes.c_char_p
        return {"version": self.xlc.__version__, "llama_cpp": f"ggml {so.ggml_version().decode()} "
                f"(BUILD_INFO {self.xlc.BUILD_INFO['build_number']}/{self.xlc.BUILD_INFO['commit']})",
                "flash_attn": "auto (-1)"}

    def run(self, tokens: list[int], max_tokens: int, cap_s: float, settings: tuple[int, ...]) -> dict[str, Any]:
        """The server of each thread count in ``settings`` reads the prompt and generates (stopped
        after ``cap_s`` seconds of generation); a streamed chunk with text is taken as one token."""
        out: dict[str, Any] = {"n_prompt": len(tokens)}
        for n_threads in settings:
            server = self.servers[n_threads]
            stamps: list[float] = []
            texts: list[str] = []

            def on_chunk(chunk: dict[str, Any], stamps: list[float] = stamps, texts: list[str] = texts) -> bool:
                if text := chunk["choices"][0]["text"]:
                    stamps.append(time.perf_counter())
                    texts.append(text)
                return len(stamps) > 0 and stamps[-1] - stamps[0] >= cap_s  # True stops the stream

            start = time.perf_counter()
            server.handle_completions({"prompt": tokens, "n_predict": max_tokens, "temperature": 0.0, "top_k": 1,
                                       "cache_prompt": False, "stream": True}, on_chunk)
            out[f"prefill{n_threads}_s"] = stamps[0] - start
            out[f"gen{n_threads}"] = {"s": stamps[-1] - stamps[0], "n": len(texts), "text": "".join(texts)}
        out["prefill_s"] = out[f"prefill{GEN_THREADS[0]}_s"]
        return out


WORKERS: dict[str, type[Cyllama] | type[Xllamacpp]] = {"cyllama": Cyllama, "llama-cpp-cffi": LlamaCppCffi, "xllamacpp": Xllamacpp}


def worker(name: str, gguf: str, prompts_file: str, max_tokens: int, cap_s: float) -> None:
    """Load the model, say what was loaded, then answer each line on stdin (``warmup`` or ``pass``)."""
    prompts = json.loads(Path(prompts_file).read_text())
    rt = WORKERS[name](gguf)
    tokenize = getattr(rt, "tokenize", None)  # xllamacpp's Server API has no tokenizer
    info = {**rt.info(), "tokens_match": tokenize and [tokenize(p["text"]) == p["tokens"] for p in prompts]}
    print(json.dumps(info), flush=True)
    run = rt.run if isinstance(rt, Xllamacpp) else lambda t, m, c, g: _direct_run(rt, t, m, c, g)
    for line in sys.stdin:  # "warmup" (the first prompt's first 64 tokens), "pass" or "pass-gen1"
        todo = [p["tokens"][:64] for p in prompts[:1]] if line.strip() == "warmup" else [p["tokens"] for p in prompts]
        settings = GEN_THREADS[:1] if line.strip() == "pass-gen1" else GEN_THREADS
        print(json.dumps([run(tokens, max_tokens, cap_s, settings) for tokens in todo]), flush=True)


# --- driver: the project's venv -----------------------------------------------------------------
def build_prompts(n: int) -> list[dict[str, Any]]:
    """The first ``n`` HotpotQA questions as reader prompts: text and the tokens native.py reads."""
    from ragfolio.core.answering.prompts import answer_messages
    from ragfolio.core.llm.native import LlamaCppBackend

    backend = LlamaCppBackend(n_threads=1, n_threads_batch=BATCH_THREADS)
    rows = [json.loads(line) for line in Path("/work/shared/data/hotpotqa.jsonl").open()][:n]
    out = []
    for row in rows:
        contexts = sorted(row["contexts"], key=lambda c: not c["is_supporting"])[:4]
        prompt = backend.prompt(answer_messages(row["question"], [(c["title"], c["text"]) for c in contexts]))
        out.append({"id": row["id"], "text": str(prompt), "tokens": backend.tokens(prompt)})
    return out


def summarise(passes: list[list[dict[str, Any]]]) -> dict[str, float]:
    """Median over passes of (sum of tokens / sum of seconds) for prefill and each generation setting."""
    def rate(runs: list[dict[str, Any]], tokens: str, seconds: str, sub: str | None = None) -> float:
        got = [r[sub] if sub else r for r in runs]
        return sum(g[tokens] - (1 if sub else 0) for g in got) / sum(g[seconds] for g in got)

    out = {"passes": len(passes), "prefill_tok_s": statistics.median(rate(p, "n_prompt", "prefill_s") for p in passes)}
    for n in GEN_THREADS:
        have = [p for p in passes if f"gen{n}" in p[0]]
        out[f"gen{n}_passes"] = len(have)
        out[f"gen{n}_tok_s"] = statistics.median(rate(p, "n", "s", f"gen{n}") for p in have)
        out[f"gen{n}_mean_tokens"] = statistics.mean(r[f"gen{n}"]["n"] for p in have for r in p)
        if f"prefill{n}_s" in have[0][0]:
            out[f"prefill_with_gen{n}_tok_s"] = statistics.median(rate(p, "n_prompt", f"prefill{n}_s") for p in have)
    return out


def _same(entry: dict[str, Any], reference: dict[str, Any], key: str) -> bool | None:
    """Whether every generation of ``entry`` agrees with the reference's ``key`` as far as the
    shorter goes (a generation cut at ``--gen-cap-s`` is a prefix); None: the runtime gives none.
    Texts are compared without leading whitespace: cyllama's ``detokenize`` drops the reply's first space."""
    pairs = [(r[f"gen{n}"], c[f"gen{n}"]) for p, q in zip(entry["passes"], reference["passes"], strict=False)
             for r, c in zip(p, q, strict=True) for n in GEN_THREADS if f"gen{n}" in r]
    if any(key not in mine for mine, _ in pairs):
        return None
    trim = (lambda x: x.lstrip()) if key == "text" else (lambda x: x)
    return all(a[:len(b)] == b or b[:len(a)] == a for a, b in ((trim(m[key]), trim(t[key])) for m, t in pairs))


def table(report: dict[str, Any]) -> str:
    """The results as a markdown table, one row per runtime."""
    rows = ["| runtime | version | llama.cpp | passes (gen 2 threads) | prefill tok/s (batch threads 2) | gen tok/s, 1 thread | "
            "gen tok/s, 2 threads (mean tokens) | same text as cyllama 0.2.18 | same token ids |",
            "|---|---|---|---|---|---|---|---|---|"]
    for name, entry in report["runtimes"].items():
        if "summary" not in entry:
            continue
        info, s = entry["info"], entry["summary"]
        prefill = f"{s['prefill_tok_s']:.1f}"
        if "prefill_with_gen2_tok_s" in s:
            prefill += f" / {s['prefill_with_gen2_tok_s']:.1f}"
        label = " ".join([name, *info["env"]])
        rows.append(f"| {label} | {info['version']} | {info['llama_cpp']} | {s['passes']} / {s['gen2_passes']} | {prefill} | "
                    f"{s['gen1_tok_s']:.1f} | {s['gen2_tok_s']:.1f} ({s['gen2_mean_tokens']:.0f}) | "
                    f"{entry.get('same_text')} | {entry.get('same_ids')} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runtime", action="append", default=[],
                        help="'NAME=PYTHON [KEY=VALUE ...]': a venv's python and its environment; NAME is a "
                             "worker's (cyllama, xllamacpp, llama-cpp-cffi), or one with a '+suffix' for a variant")
    parser.add_argument("--prompts", type=int, default=5)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--gen-cap-s", type=float, default=6.0, help="longest one generation may run")
    parser.add_argument("--gen2-passes", type=int, default=1, help="passes that also generate with 2 threads")
    parser.add_argument("--budget-s", type=float, default=960.0, help="no pass starts that would end past this")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    if WORKER_ENV in os.environ:  # a worker: its arguments come in the environment (see below)
        job = json.loads(os.environ[WORKER_ENV])
        worker(job["name"], job["gguf"], job["prompts"], job["tokens"], job["cap_s"])
        return 0
    from ragfolio.core.llm.models import model_path

    gguf, prompts = model_path(), build_prompts(args.prompts)
    prompts_file = (args.out or Path("reader_runtimes.json")).with_suffix(".prompts.json")
    prompts_file.parent.mkdir(parents=True, exist_ok=True)
    prompts_file.write_text(json.dumps(prompts))
    report: dict[str, Any] = {"gguf": gguf, "prompt_tokens": [len(p["tokens"]) for p in prompts],
                              "max_tokens": args.tokens, "loadavg_before": os.getloadavg(), "runtimes": {}}
    procs, started = {}, time.perf_counter()
    for spec in args.runtime:
        name, python, *env = spec.replace("=", " ", 1).split()
        job = {"name": name.split("+")[0], "gguf": gguf, "prompts": str(prompts_file), "tokens": args.tokens,
               "cap_s": args.gen_cap_s}
        procs[name] = subprocess.Popen([python, __file__], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                       env={**os.environ, **dict(e.split("=", 1) for e in env), WORKER_ENV: json.dumps(job)})
        info = json.loads(procs[name].stdout.readline())  # type: ignore[union-attr]
        report["runtimes"][name] = {"info": {**info, "env": env}, "passes": []}

    def ask(name: str, what: str) -> None:
        """Send ``what`` to a live worker and keep its pass; a worker that died is recorded and dropped."""
        proc = procs[name]
        try:
            proc.stdin.write(what + "\n")  # type: ignore[union-attr]
            proc.stdin.flush()  # type: ignore[union-attr]
            line = proc.stdout.readline()  # type: ignore[union-attr]
        except BrokenPipeError:
            line = ""
        if not line:
            report["runtimes"][name]["error"] = f"the worker exited (code {proc.wait()}) at {what!r}"
            del procs[name]
        elif what != "warmup":
            report["runtimes"][name]["passes"].append(json.loads(line))

    for name in list(procs):
        ask(name, "warmup")
    for k in range(args.passes):
        pass_start = time.perf_counter()
        for name in list(procs):
            ask(name, "pass" if k < args.gen2_passes else "pass-gen1")
        now = time.perf_counter()
        print(f"pass {k + 1}/{args.passes} done at {now - started:.0f} s", file=sys.stderr)
        if args.out:  # what was measured so far survives a crash
            args.out.write_text(json.dumps(report, indent=1))
        if now - started + (now - pass_start) > args.budget_s:
            break
    for proc in procs.values():
        proc.stdin.close()  # type: ignore[union-attr]
        proc.wait(timeout=60)
    report["loadavg_after"], report["measure_s"] = os.getloadavg(), time.perf_counter() - started
    reference = report["runtimes"].get("cyllama")
    for name, entry in report["runtimes"].items():
        if "error" in entry:
            print(f"{name}: {entry['error']}", file=sys.stderr)
        if not entry["passes"]:
            continue
        entry["summary"] = summarise(entry["passes"])
        if reference and reference["passes"]:
            entry["same_text"], entry["same_ids"] = _same(entry, reference, "text"), _same(entry, reference, "ids")
    print(table(report), f"\n\nload average before {report['loadavg_before']}, after {report['loadavg_after']}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
