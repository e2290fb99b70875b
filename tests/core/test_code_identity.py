"""code_identity: the source digest is safe to compute from many threads at once."""

from __future__ import annotations

import ast
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from ragfolio.core import code_identity


def test_threads_computing_digests_never_parse_at_the_same_time(monkeypatch) -> None:
    # CPython 3.11's ast.parse is not thread-safe (python/cpython#106905): the portfolio executor's
    # members compute their first cache key in parallel, and one of them failed in CI with
    # "AST constructor recursion depth mismatch". A slow parse makes any overlap certain to show.
    inside, overlaps = [0], [0]
    guard = threading.Lock()
    real_parse = ast.parse

    def slow_parse(*args, **kwargs):
        with guard:
            inside[0] += 1
            overlaps[0] += inside[0] > 1
        time.sleep(0.002)
        try:
            return real_parse(*args, **kwargs)
        finally:
            with guard:
                inside[0] -= 1

    monkeypatch.setattr(code_identity.ast, "parse", slow_parse)
    code_identity._digest.cache_clear()  # as a new process would
    modules = ["ragfolio.core.retrieval.running.pool_runner", "ragfolio.core.retrieval.running.member_executor"]
    try:
        with ThreadPoolExecutor(max_workers=6) as pool:
            digests = list(pool.map(lambda _: code_identity.source_digest(modules), range(6)))
    finally:
        code_identity._digest.cache_clear()  # as a new process would
    assert overlaps[0] == 0
    assert len(set(digests)) == 1
    assert digests[0] == code_identity.source_digest(modules)
