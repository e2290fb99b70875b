"""The parameters of the stages up to router_training on the tiny fixtures (a BM25-only pool, no
models), shared by the tests that run those stages before the one they test."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def tiny_stage_params(tiny_dir: Path, grid: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{parameter group: block}`` for data_prep .. packaging over ``tiny_dir``, pool ``grid``:
    a dev split, 2 passages per member, k = 3, a small learned router, auto serving at l = 2, the
    default reader, no answer check."""
    return {
        "data_prep": {"raw_dir": str(tiny_dir), "test_dir": None, "test_fraction": 0.3, "dev_fraction": 0.3, "seed": 0},
        "candidate_scoring": {"num_docs": 2, "prefilter_depth": 10, "score": "support_recall",
                              "graph_max_degree": 20, "encoders": {}, "grid": grid},
        "candidate_grids": {},
        "portfolio_selection": {"k": 3, "k_max": 4, "random_draws": 5, "seed": 0},
        "paper_router": None,  # the lab's study of the paper's router: off
        "router_training": {
            "text_features": {"n_features": 64}, "encoders": [],
            "router": {"hidden": 8, "embedding_dim": 4, "max_epochs": 3, "patience": 2},
            "retrieval_routing": {"agreement_depth": 5, "post_retrieval": {"min_questions": 2, "min_z": 0.0}},
            "bundle": {"router": "auto", "default_l": 2}, "seed": 0,
        },
        "packaging": {"answer_check": {"questions": 0}},  # no reader calls (test_pipelines checks answers)
    }
