from pathlib import Path

import pytest
import yaml

from ragfolio.core.retrieval.pool import CandidateSpec, count_by_family, expand_grid, make_candidate, resolve_grid

ROOT = Path(__file__).resolve().parents[3]


def test_expand_grid_cartesian_product_and_names() -> None:
    cands = expand_grid({"bm25": {"k1": [0.9, 1.2], "b": [0.5, 0.75]}, "dense": [{"encoder": "minilm"}]})
    assert len(cands) == 5
    assert cands[0].name == "bm25(k1=0.9,b=0.5,method=lucene,stopwords=english)"
    assert cands[0].params == {"k1": 0.9, "b": 0.5, "method": "lucene", "stopwords": "english"}
    assert cands[-1].family == "dense" and cands[-1].params["index_type"] == "flat"
    assert CandidateSpec.from_record(cands[1].to_record()) == cands[1]


def test_grid_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="family='sparse'"):
        expand_grid({"sparse": {"k1": 1.0}})
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['k2'\]"):
        make_candidate("bm25", {"k2": 1.0})
    with pytest.raises(ValueError, match="missing required parameter"):
        make_candidate("mmr", {"encoder": "minilm"})
    with pytest.raises(ValueError, match="more than once"):
        expand_grid({"bm25": [{"k1": 1.0}, {"k1": 1.0}]})


def test_default_grid_has_at_least_200_candidates_of_every_family_but_the_opt_in_one() -> None:
    params = yaml.safe_load((ROOT / "conf/base/parameters_candidate_scoring.yml").read_text())
    grids = yaml.safe_load((ROOT / "conf/base/parameters_candidate_grids.yml").read_text())["candidate_grids"]
    cands = expand_grid(resolve_grid(params["candidate_scoring"]["grid"], grids))
    counts = count_by_family(cands)
    assert len(cands) >= 200
    # cross_encoder trains a model first: opted into with its own preset (grid: cross_encoder)
    assert all(n > 0 for family, n in counts.items() if family != "cross_encoder") and not counts["cross_encoder"], counts
    used = {c.params.get("encoder") for c in cands} - {None}
    assert used == set(params["candidate_scoring"]["encoders"])


def test_resolve_grid_returns_a_written_grid_or_the_named_preset() -> None:
    written = {"bm25": {"k1": 1.0}}
    presets = {"small": {"dense": {"encoder": "minilm"}}}
    assert resolve_grid(written, presets) is written
    assert resolve_grid("small", presets) == presets["small"]
    with pytest.raises(ValueError, match=r"grid='papr' is not a preset; presets: \['small'\]"):
        resolve_grid("papr", presets)


def test_graph_options_at_their_defaults_leave_names_and_params_unchanged() -> None:
    plain = make_candidate("graph", {"seeds": "bm25"})
    assert make_candidate("graph", {"seeds": "bm25", "max_entity_df": None, "max_candidates": None}) == plain
    assert "max_entity_df" not in plain.params and "max_entity_df" not in plain.name
    capped = make_candidate("graph", {"seeds": "bm25", "max_entity_df": 300, "max_candidates": 1000})
    assert capped.name.endswith(",max_entity_df=300,max_candidates=1000)")
    assert capped.params["max_entity_df"] == 300 and capped.params["max_candidates"] == 1000
