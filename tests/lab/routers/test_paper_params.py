"""The paper router study's settings (``paper_router``): validated against the pool's query blocks."""

import pytest
from pydantic import ValidationError

from ragfolio_lab.routers.params import paper_router_params

POOL = ["minilm", "e5"]


def test_off_by_default_and_hyperparameters_beside_the_settings() -> None:
    assert paper_router_params(None, POOL) is None
    on = paper_router_params({"max_epochs": 3}, POOL)
    assert on is not None and on.encoders is None and not on.universal and on.hyperparameters == {"max_epochs": 3}
    chosen = paper_router_params({"encoders": ["e5", "minilm", "mpnet", "gemma"], "universal": True}, POOL)
    assert chosen is not None and chosen.encoders == ["e5", "minilm", "mpnet", "gemma"] and chosen.universal


def test_an_unknown_encoder_block_or_key_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"encoders \['flan_t5'\] are not query blocks"):
        paper_router_params({"encoders": ["e5", "flan_t5"]}, POOL)
    with pytest.raises(ValueError, match=r"encoders \['e5'\] are not query blocks"):
        paper_router_params({"encoders": ["e5"]}, ["minilm"])  # not among the pool's
    with pytest.raises(ValidationError, match=r"keys \['max_epoch'\] are neither"):
        paper_router_params({"max_epoch": 3}, POOL)
    with pytest.raises(ValidationError, match=r"keys \['blocks'\] are neither"):  # named by encoders instead
        paper_router_params({"blocks": ["e5"]}, POOL)
