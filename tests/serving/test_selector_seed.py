"""The service and answering evaluation show the selector the candidates in one order: the bundle's seed.

The seed was 0 in the service and 42 (``answering_evaluation.seed``) in evaluation, so at l >= 2
the service asked the selector in an order that was never evaluated. Now packaging records
``router_training.bundle.selector_seed`` in the bundle and both answer with it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from conftest import write_config

from ragfolio.core.bundle import SELECTOR_SEED, load_bundle, save_bundle
from ragfolio.core.routing.judging.splits import TrainedRouters
from ragfolio.serving.config import load_config
from ragfolio.serving.engine import ServingEngine
from ragfolio_lab.pipelines.answering_evaluation import nodes


@pytest.fixture(scope="module")
def seeded_bundle(tiny_bundle: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny bundle, saved with selector seed 7."""
    path = tmp_path_factory.mktemp("seeded") / "bundle"
    save_bundle(dataclasses.replace(load_bundle(tiny_bundle), selector_seed=7), path)
    return path


class _Stop(Exception):
    pass


def _evaluation_seed(bundle: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    """The seed answering evaluation gives its answerer for ``bundle`` (stopped there)."""
    seeds: list[int] = []

    def answerer(backend: object, **kwargs: object) -> None:
        seeds.append(int(kwargs["seed"]))  # type: ignore[call-overload]
        raise _Stop

    monkeypatch.setattr(nodes, "Answerer", answerer)
    with pytest.raises(_Stop):  # the bundle's reader: the embedded one, which loads on its first call only
        nodes.answer_test_questions({"tiny": []}, {"tiny": load_bundle(bundle)}, load_bundle(bundle),
                                    TrainedRouters({}, {}), None, {})  # type: ignore[arg-type]
    return seeds[0]


def test_the_service_and_evaluation_answer_with_the_bundles_seed(
        tiny_bundle, seeded_bundle, fake_llm_url, tmp_path, monkeypatch) -> None:
    assert load_bundle(seeded_bundle).selector_seed == 7 and load_bundle(seeded_bundle).manifest["selector_seed"] == 7
    for bundle, seed in ((tiny_bundle, SELECTOR_SEED), (seeded_bundle, 7)):
        config = load_config(write_config(tmp_path / "serving.yml", bundle, fake_llm_url, warm_up=False), env={})
        engine = ServingEngine(config)
        try:
            assert engine.answerer.seed == seed and engine.portfolio().selector_seed == seed
        finally:
            engine.close()
        assert _evaluation_seed(bundle, monkeypatch) == seed


def test_the_reader_refuses_a_seed_of_its_own_for_the_answerer() -> None:
    from ragfolio.pipelines.packaging.nodes import ReaderParams

    with pytest.raises(ValueError, match="packaging.reader.answerer: seed"):
        ReaderParams(answerer={"seed": 3})
