"""Nested parameter blocks are checked by the constructor they configure: a misspelt key or a
wrong type fails when the stage's parameters are validated, naming the key; the shipped ones pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from ragfolio.pipelines.candidate_scoring.nodes import CandidateScoringParams
from ragfolio.pipelines.packaging.nodes import PackagingParams
from ragfolio.router_params import RouterTrainingParams
from ragfolio_lab.pipelines.answering_evaluation.nodes import AnsweringEvaluationParams

CONF = Path(__file__).resolve().parents[2] / "conf" / "base"


def _params(stage: str) -> dict[str, Any]:
    params: dict[str, Any] = yaml.safe_load((CONF / f"parameters_{stage}.yml").read_text())[stage]
    return params


def test_the_shipped_blocks_pass_and_are_handed_on_as_written() -> None:
    router_training = RouterTrainingParams(**_params("router_training"))
    assert router_training.router == _params("router_training")["router"]
    assert router_training.retrieval_routing.post_retrieval == _params("router_training")["retrieval_routing"]["post_retrieval"]
    answering = AnsweringEvaluationParams(**_params("answering_evaluation"))
    assert answering.vendi_rag == _params("answering_evaluation")["vendi_rag"]
    assert PackagingParams(**_params("packaging")).reader.answerer == _params("packaging")["reader"]["answerer"]
    scoring = _params("candidate_scoring")
    assert CandidateScoringParams(**{**scoring, "grid": "default"}).bm25_base == scoring["bm25_base"]


@pytest.mark.parametrize(("block", "value", "message"), [
    ("router", {"hiden": 64}, r"router_training.router: hiden: Extra inputs are not permitted"),
    ("router", {"hidden": "wide"}, r"router_training.router: hidden: Input should be a valid integer"),
    ("text_features", {"word_ngram": [1, 2]}, r"router_training.text_features: word_ngram"),
])
def test_router_training_blocks_name_a_bad_key_or_type(block: str, value: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RouterTrainingParams(**{**_params("router_training"), block: value})


def test_the_retrieval_routers_blocks_are_checked_against_their_router() -> None:
    params = _params("router_training")
    bad = {**params["retrieval_routing"], "post_retrieval": {"n_fold": 5}}
    with pytest.raises(ValueError, match=r"retrieval_routing.post_retrieval: n_fold: Extra inputs.*keys allowed: .*'n_folds'"):
        RouterTrainingParams(**{**params, "retrieval_routing": bad})
    bad = {**params["retrieval_routing"], "pre_retrieval": {"completion": "best"}}
    with pytest.raises(ValueError, match=r"pre_retrieval: completion: Input should be 'greedy' or 'top'"):
        RouterTrainingParams(**{**params, "retrieval_routing": bad})


@pytest.mark.parametrize(("block", "value", "message"), [
    ("vendi_rag", {"refine_query": "rewrite"}, r"answering_evaluation.vendi_rag: refine_query"),
    ("vendi_rag", {"num_docs": 8}, r"vendi_rag: num_docs: Extra inputs"),  # the node passes candidate scoring's
    ("llm", {"kind": "llama_cpp"}, r"llm\s+Extra inputs"),  # the reader is the bundle's: packaging.reader
])
def test_answering_blocks_name_a_bad_key_or_type(block: str, value: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AnsweringEvaluationParams(**{**_params("answering_evaluation"), block: value})


@pytest.mark.parametrize(("block", "value", "message"), [
    ("answerer", {"max_answer_token": 8}, r"packaging.reader.answerer: max_answer_token"),
    ("llm", {"kind": "openai", "modle": "x"}, r"unknown keys \['modle'\] for backend kind='openai'"),
    ("llm", {"kind": "vllm"}, r"backend kind='vllm' must be one of"),
])
def test_the_reader_blocks_name_a_bad_key_or_type(block: str, value: dict[str, Any], message: str) -> None:
    reader = _params("packaging")["reader"]
    with pytest.raises(ValueError, match=message):
        PackagingParams(reader={**reader, block: value})


def test_the_bm25_base_is_checked_against_the_bm25_family() -> None:
    params = {**_params("candidate_scoring"), "grid": "default", "bm25_base": {"k_1": 1.5}}
    with pytest.raises(ValueError, match=r"bm25_base: unknown parameter\(s\) \['k_1'\]; allowed: \['b', 'backend'"):
        CandidateScoringParams(**params)
