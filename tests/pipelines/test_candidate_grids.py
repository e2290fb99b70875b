"""The grid presets of conf/base/parameters_candidate_grids.yml, chosen as `kedro run --params` chooses them."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from kedro.config import OmegaConfigLoader
from omegaconf import OmegaConf

from ragfolio.core.retrieval.pool import CandidateSpec
from ragfolio.pipelines.candidate_scoring.nodes import expand_candidates
from ragfolio.pipelines.candidate_scoring.pipeline import create_pipeline

ROOT = Path(__file__).resolve().parents[2]


def project_parameters(*overrides: str) -> dict:
    """The project's parameters with ``--params`` overrides, parsed as Kedro's CLI parses them (a dotlist)."""
    runtime = OmegaConf.to_container(OmegaConf.from_dotlist(list(overrides))) if overrides else None
    loader = OmegaConfigLoader(str(ROOT / "conf"), base_env="base", default_run_env="local", runtime_params=runtime)
    return loader["parameters"]


def pool(*overrides: str) -> list[CandidateSpec]:
    params = project_parameters(*overrides)
    return [CandidateSpec.from_record(c) for c in expand_candidates(params["candidate_scoring"], params["candidate_grids"])]


def test_the_default_grid_is_the_215_candidate_pool() -> None:
    candidates = pool()
    assert len(candidates) == 215
    assert pool("candidate_scoring.grid=default") == candidates


def test_grid_cross_encoder_is_the_default_pool_and_twelve_cross_encoder_candidates() -> None:
    candidates = pool("candidate_scoring.grid=cross_encoder")
    rerankers = [c for c in candidates if c.family == "cross_encoder"]
    assert [c for c in candidates if c.family != "cross_encoder"] == pool()
    assert len(rerankers) == 12 and {
        (c.params["prefilter"], c.params["depth"], c.params.get("fusion", "none")) for c in rerankers
    } == {(base, depth, fusion) for base in ("bm25", "dense:minilm", "hybrid:e5") for depth in (10, 20)
          for fusion in ("none", "rrf")}


def test_grid_paper_expands_the_papers_360_candidates() -> None:
    candidates = pool("candidate_scoring.grid=paper")
    assert len(candidates) == len({c.name for c in candidates}) == 360
    by_family_encoder = Counter((c.family, c.params["encoder"]) for c in candidates)
    for encoder in ("minilm", "e5"):
        # 141 = plain nearest neighbours + discounted similarity 14 gammas x 10 thresholds
        assert by_family_encoder["dense", encoder] == 1 and by_family_encoder["ds", encoder] == 140
        assert by_family_encoder["vendi", encoder] == 21 and by_family_encoder["graph", encoder] == 18
    assert sum(by_family_encoder.values()) == 360
    ds = [c for c in candidates if c.family == "ds"]
    assert {c.params["r"] for c in ds} == {round(0.1 * i, 1) for i in range(10)}
    assert {c.params["gamma"] for c in ds} == {round(0.2 * i, 1) for i in range(1, 11)} | {4.0, 6.0, 8.0, 10.0}
    assert {c.params["s"] for c in candidates if c.family == "vendi"} == {round(0.05 * i, 2) for i in range(21)}
    # the diversifiers rerank their own encoder's dense prefilter; graph-dense seeds from it
    assert all(c.params["prefilter"] == f"dense:{c.params['encoder']}" for c in candidates if c.family in ("ds", "vendi"))
    graph = [c for c in candidates if c.family == "graph"]
    assert all(c.params["seeds"] == f"dense:{c.params['encoder']}" and c.params["rank"] == "dense" for c in graph)
    assert {(c.params["hops"], c.params["max_entity_df"], c.params["max_candidates"]) for c in graph} == {
        (h, df, m) for h in (1, 3, 5) for df in (100, 300, 500) for m in (1000, 2000)
    }


def test_an_unknown_preset_fails_naming_the_presets() -> None:
    with pytest.raises(ValueError, match=r"grid='papr' is not a preset; presets: \['cross_encoder', 'default', 'paper'\]"):
        pool("candidate_scoring.grid=papr")


def test_the_expanding_node_reads_the_presets() -> None:
    (node,) = [n for n in create_pipeline().nodes if n.name == "expand_candidates"]
    assert set(node.inputs) == {"params:candidate_scoring", "params:candidate_grids"}
