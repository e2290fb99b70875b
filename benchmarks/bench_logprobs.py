"""What recording token logprobs costs the embedded reader, and that its greedy replies stay the same.

The reader (Qwen2.5-Coder-1.5B-Instruct on llama.cpp, one model with ``logprobs`` switched on and
off in turn, so load drifts cancel):

1. answers the first ``--questions`` HotpotQA questions of the bundled sample (4 passages, as
   ``single_best`` does) with and without logprobs: whether the replies are the same, and the
   mean answer confidence (:func:`~ragfolio.core.answering.confidence.answer_confidence`);
2. continues a one-line prompt for ``--tokens`` tokens ``--repeats`` times each way: the median
   milliseconds per generated token (prefill is a few tokens), on and off;
3. times :func:`~ragfolio.core.llm.logprobs.token_logprob` alone (reading the 151,936 logits of a
   position and their log-softmax), the cost added to each generated token.

    .venv/bin/python benchmarks/bench_logprobs.py --questions 4 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "01_raw" / "hotpotqa.jsonl"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()

    from ragfolio.core.answering.answerer import Answerer
    from ragfolio.core.answering.confidence import answer_confidence
    from ragfolio.core.llm.logprobs import token_logprob
    from ragfolio.core.llm.native import LlamaCppBackend

    backend = LlamaCppBackend()
    answerer = Answerer(backend)
    answerer.answer("warm-up", [("warm-up", "warm-up")])
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()[:args.questions]]
    same, confidences = 0, []
    for row in rows:
        passages = [(c["title"], c["text"]) for c in row["contexts"]][:4]
        texts = {}
        for on in (True, False):
            backend.logprobs = on
            said = answerer.answer(row["question"], passages).completion
            texts[on] = said.text
            if on and (confidence := answer_confidence(said)) is not None:
                confidences.append(confidence)
        same += texts[True] == texts[False]
    print(f"answers the same with and without logprobs: {same} of {len(rows)}; "
          f"mean answer confidence {statistics.mean(confidences):.3f} over {len(confidences)}")

    prompt = backend.prompt([{"role": "user", "content": "Write a long story about a lighthouse keeper."}])
    per_token: dict[bool, list[float]] = {True: [], False: []}
    for i in range(args.repeats):
        for on in ((True, False) if i % 2 == 0 else (False, True)):
            backend.logprobs = on
            said = backend.generate([prompt], max_tokens=args.tokens)[0]
            per_token[on].append(said.latency_ms / said.completion_tokens)
    off, on = statistics.median(per_token[False]), statistics.median(per_token[True])
    print(f"generation, median ms a token over {args.repeats} runs of {args.tokens} tokens: "
          f"off {off:.1f}, on {on:.1f} ({on - off:+.1f} ms, {on / off - 1:+.1%})")

    ctx = backend._ctx  # after a call: its last position's logits are there to read
    start = time.perf_counter()
    for _ in range(args.reads):
        token_logprob(ctx, 0)
    print(f"token_logprob alone: {(time.perf_counter() - start) / args.reads * 1000:.2f} ms a token "
          f"({args.reads} reads)")


if __name__ == "__main__":
    main()
