"""Packaging's last check: do no harm on answers (:mod:`ragfolio.core.answering.answer_check`).

``check_served_answers`` has the served bundle's reader answer a seeded sample of dev questions
(``packaging.answer_check.questions`` of them, the datasets taking turns) and keeps routing, or the
wide single-best prompt, at an l only where those answers do not say it loses to the single best
member's own passages. The decision and its evidence go into the bundle (``routed_ls``,
``wide_ls`` and ``selection.answer_check``) and into ``08_reporting/answer_check.json``. The other
bundles (one per dataset) are passed on unchecked: ``bentoml serve`` loads the served one.
"""

from __future__ import annotations

import dataclasses
import logging
import zlib
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from tqdm.auto import tqdm

from ragfolio.bundle_params import BundleParams
from ragfolio.core.answering.adaptive_rag import AdaptiveRAG
from ragfolio.core.answering.answer_check import check_answers
from ragfolio.core.answering.answerer import Answerer
from ragfolio.core.bundle import PortfolioBundle
from ragfolio.core.llm.backends import make_backend

logger = logging.getLogger(__name__)


class AnswerCheckParams(BaseModel):
    """``packaging.answer_check``: how many dev questions, at which l's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    questions: int = Field(20, ge=0)  # 0: no check, what router training chose is served
    ls: list[int] = Field(default_factory=lambda: [1, 2])
    seed: int = 42
    member_timeout_s: float = Field(30.0, gt=0)


def dev_sample(questions: list[dict[str, Any]], datasets: list[str], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` dev questions of ``datasets`` with gold answers, in a seeded order (crc32 of the seed
    and the id), the datasets taking turns so that any prefix is balanced."""
    def key(q: dict[str, Any]) -> tuple[int, str]:
        return zlib.crc32(f"{seed}:{q['id']}".encode()), q["id"]

    queues = {d: sorted((q for q in questions if q.get("split") == "dev" and q["dataset"] == d and q.get("answers")),
                        key=key) for d in sorted(datasets)}
    out: list[dict[str, Any]] = []
    while len(out) < n and any(queues.values()):
        for queue in queues.values():
            if queue and len(out) < n:
                out.append(queue.pop(0))
    return out


def check_served_answers(
    bundles: Mapping[str, PortfolioBundle], questions: list[dict[str, Any]], packaging: dict[str, Any],
    bundle: dict[str, Any],
) -> tuple[dict[str, PortfolioBundle], dict[str, Any]]:
    """The bundles, the served one (``router_training.bundle.portfolio``) with do no harm on answers
    applied, and the check's report (``{"portfolio", "checked", ...}``, :meth:`AnswerCheck.to_dict
    <ragfolio.core.answering.answer_check.AnswerCheck.to_dict>`)."""
    params = AnswerCheckParams(**packaging.get("answer_check", {}))
    key = BundleParams(**bundle).portfolio
    served = bundles[key]
    datasets = sorted({q["dataset"] for q in questions}) if key == "all" else [key]
    sample = dev_sample(questions, datasets, params.questions, params.seed)
    if not sample:
        why = ("packaging.answer_check.questions is 0" if params.questions == 0
               else "there are no dev questions with answers (data_prep.dev_fraction: 0?)")
        logger.warning("do no harm on answers not checked: %s", why)
        return dict(bundles), {"portfolio": key, "checked": False, "reason": f"Not checked: {why}."}
    reader = served.reader
    answerer = Answerer(make_backend(reader.llm), **reader.answerer, seed=served.selector_seed)
    rag = AdaptiveRAG.from_bundle(served, answerer, timeout_s=params.member_timeout_s)
    bar = tqdm(total=len(sample), desc="do no harm on answers (dev)", unit="question")
    try:
        check = check_answers(rag, [(q["question"], q["answers"]) for q in sample],
                              [l for l in params.ls if l <= served.k], progress=lambda done, _: bar.update(1))
    finally:
        bar.close()
        rag.close()
    checked = dataclasses.replace(served, routed_ls=check.routed_ls, wide_ls=check.wide_ls,
                                  selection={**served.selection, "answer_check": check.to_dict()})
    return {**bundles, key: checked}, {"portfolio": key, "checked": True, **check.to_dict()}
