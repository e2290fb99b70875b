"""Do no harm on answers: dev EM per l against the single best member's passages, and the decision."""

from __future__ import annotations

import json
import re

import pytest
from fake_encoders import tiny_runner  # noqa: F401 - the fixtures' module
from routed_portfolio import routed_portfolio

from ragfolio.core.answering.adaptive_rag import AdaptiveRAG
from ragfolio.core.answering.answer_check import check_answers
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.llm.chat import Completion
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedSystem
from ragfolio.pipelines.packaging.served_answers import dev_sample


class FirstTitleReader:
    """Answers with the title of the first passage shown, unless it was shown more than ``max_passages``
    (then "too many"); a selector call names the first candidate."""

    def __init__(self, max_passages: int) -> None:
        self.max_passages, self.calls = max_passages, 0

    def complete(self, messages, *, max_tokens, temperature=0.0, json_schema=None) -> Completion:
        self.calls += 1
        prompt = messages[0]["content"]
        if "choice" in json.dumps(json_schema):
            return Completion('{"choice": 1}', 20, 3, 1.0)
        titles = re.findall(r"^\[(\d+)\] ([^:]+):", prompt, flags=re.MULTILINE)
        answer = "too many" if len(titles) > self.max_passages else titles[0][1]
        return Completion(json.dumps({"answer": answer, "explanation": "evidence", "used": [1]}), 50, 9, 5.0)


@pytest.fixture
def routed_parts(tiny_dir, monkeypatch, small_grid):
    return routed_portfolio(tiny_dir, monkeypatch, small_grid)


def test_routing_and_the_wide_prompt_are_kept_only_where_dev_answers_do_not_lose(routed_parts) -> None:
    runner, members, router, hasher, queries = routed_parts
    # the router prefers member 0; the single best is member 2, whose first passage is the gold answer
    system = RoutedSystem(runner, members, router, hasher, ["minilm"], routed_ls=[1], single_best=2)
    reader = FirstTitleReader(max_passages=system.depth)
    rag = AdaptiveRAG(system, Answerer(reader, abstain="off"))
    gold = [rag.answer(RetrievalRequest(q, 1, system.depth), members=[2]).answer for q in queries]
    routed_first = [rag.answer(RetrievalRequest(q, 1, system.depth)).answer for q in queries]
    questions = [(q, [g]) for q, g in zip(queries, gold, strict=True)]
    check = check_answers(rag, questions, [1, 2])
    assert check.n == len(queries) and set(check.tests) == {"l1", "l2"}
    l1, l2 = check.tests["l1"], check.tests["l2"]
    assert l1["system"] == "routed" and l2["system"] == "single_best_wide"
    assert l1["em_single_best"] == 1.0 and l1["em"] == pytest.approx(
        sum(r == g for r, g in zip(routed_first, gold, strict=True)) / len(queries))
    # the wide prompt (2 x depth passages) always says "too many": it loses, as the interval shows
    assert l2["em"] == 0.0 and l2["high"] < 0 and l2["loses"]
    assert 2 not in check.wide_ls and set(check.wide_ls) == set(range(1, system.k + 1)) - {2} - (
        {1} if l1["loses"] else set())
    assert check.routed_ls == (() if l1["loses"] else (1,))
    assert l1["loses"] == (l1["high"] < 0) and "l = 2 single_best_wide" in check.reason
    assert check.calls > 0 and check.tokens > 0
    # what the checked system serves at l = 2: the single best member at depth passages, not 2 x depth
    narrowed = RoutedSystem(runner, members, router, hasher, ["minilm"], routed_ls=check.routed_ls,
                            wide_ls=check.wide_ls, single_best=2)
    assert narrowed.unrouted_depth(2, system.depth) == system.depth
    assert system.unrouted_depth(2, system.depth) == 2 * system.depth
    with pytest.raises(ValueError, match="needs dev questions"):
        check_answers(rag, [], [1])
    with pytest.raises(ValueError, match="outside"):
        check_answers(rag, questions, [9])


def test_the_dev_sample_is_seeded_balanced_and_dev_only() -> None:
    rows = [{"id": f"{d}{i}", "dataset": d, "split": s, "question": "q", "answers": ["a"] if i != 3 else []}
            for d in ("a", "b") for i in range(21) for s in (["dev"] if i < 20 else ["test"])]
    sample = dev_sample(rows, ["a", "b"], 6, seed=1)
    assert len(sample) == 6 and [q["dataset"] for q in sample] == ["a", "b"] * 3
    assert all(q["split"] == "dev" and q["answers"] for q in sample)
    assert sample == dev_sample(rows, ["a", "b"], 6, seed=1) and sample != dev_sample(rows, ["a", "b"], 6, seed=2)
    assert len(dev_sample(rows, ["a", "b"], 50, seed=1)) == 38  # every dev question with answers, no more
