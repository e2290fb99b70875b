"""Answering evaluation answers the bundle ``bentoml serve`` loads by default too (``service_l<l>``).

Each dataset is answered from its own bundle (``served_l<l>``); the ``all`` bundle, the one served by
default, was the one bundle never answered. Now the same questions are also answered from the served
bundle, and their rows say what that bundle serves (its members, its reader).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from tiny_bundle import FIXTURES

from ragfolio.core.bundle import PortfolioBundle, load_bundle
from ragfolio.core.data.loading import load_folder
from ragfolio.core.llm.reader import ReaderSettings
from ragfolio.core.routing.judging.splits import TrainedRouters
from ragfolio.core.system.request import RetrievalRequest
from ragfolio.core.system.routed_system import RoutedSystem
from ragfolio_lab.answering.store import AnswerStore
from ragfolio_lab.pipelines.answering_evaluation import nodes

PARAMS = {"max_questions_per_dataset": 2, "systems": ["single_best", "served_l1", "served_l2"], "routed_l": [1, 2],
          "order_check_questions": 0}


def _answers(dataset: PortfolioBundle, served: PortfolioBundle, monkeypatch: pytest.MonkeyPatch, **params: object):
    sample = load_folder(FIXTURES)[:2]
    frame, _ = nodes.answer_test_questions(
        {dataset.name: sample}, {dataset.name: dataset}, served, TrainedRouters({}, {}), AnswerStore(None),
        {**PARAMS, **params})
    return frame, sample


@pytest.fixture(scope="module")
def bundles(tiny_bundle: Path, fake_llm_url: str) -> tuple[PortfolioBundle, PortfolioBundle]:
    """The tiny bundle as a dataset's (``tiny``) and as the served one (``all``, routing at l = 1 only)."""
    reader = ReaderSettings({"kind": "openai", "openai": {"base_url": fake_llm_url, "model": "fake", "api": "completions",
                                                          "max_retries": 0}})
    tiny = dataclasses.replace(load_bundle(tiny_bundle), reader=reader)
    return tiny, dataclasses.replace(tiny, name="all", routed_ls=(1,))


def test_each_dataset_is_answered_from_the_served_bundle_too(bundles, monkeypatch) -> None:
    tiny, served = bundles
    frame, sample = _answers(tiny, served, monkeypatch)
    assert set(frame["system"]) == {"served_l1", "served_l2", "service_l1", "service_l2", "single_best"}
    assert len(frame) == 5 * len(sample) and (frame["dataset"] == "tiny").all()
    system = RoutedSystem.from_bundle(served)
    try:
        for row in frame[frame["system"].str.startswith("service_l")].itertuples():
            l = int(row.system.removeprefix("service_l"))  # noqa: E741
            got = system.retrieve(RetrievalRequest(next(q.question for q in sample if q.id == row.id), l, system.depth))
            assert [served.members[j].name for j in got.members] == list(row.members) and got.routed == (l == 1)
    finally:
        system.close()
    assert set(_answers(tiny, served, monkeypatch, served_bundle=False)[0]["system"]) == {
        "served_l1", "served_l2", "single_best"}


def test_a_dataset_whose_own_bundle_is_served_reuses_its_answers(bundles, monkeypatch) -> None:
    tiny, _ = bundles
    frame, _ = _answers(tiny, tiny, monkeypatch)
    for l in (1, 2):  # noqa: E741
        own, service = (frame[frame["system"] == f"{name}_l{l}"].reset_index(drop=True) for name in ("served", "service"))
        assert list(service["prediction"]) == list(own["prediction"]) and list(service["id"]) == list(own["id"])
