"""A newcomer's path (issue 48): a folder of passages and nothing else, the embedded reader
writing the questions (on one-fact passages, a few seconds each), ``kedro run`` through the real CLI to a served bundle, and one chat answer
from the service that loads it.

The stages a bundle needs are run (data_prep, question_synthesis, candidate_scoring,
portfolio_selection, router_training, packaging); the reports of the lab's studies (router and
answering evaluation) are left out, since answering them with the embedded reader takes minutes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import service_client, write_config

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
STAGES = "data_prep,question_synthesis,candidate_scoring,portfolio_selection,router_training,packaging"
# The bundle's reader: the small model, so that the chat answer takes a second (gemma-3-270m, a base
# model, cannot write questions: it kept 0 of 14, replies not JSON or answers not in the passages).
SMALL = {"kind": "llama_cpp", "llama_cpp": {"model": "gemma-3-270m", "n_ctx": 2048}}
# Short passages of one fact each, so the writer's prompts are short.
PASSAGES = [
    ("Larkspur Instruments", "Larkspur Instruments was founded in 1994 by Tessa Lind in Norrvik."),
    ("Tessa Lind", "Tessa Lind studied hydrology at Ostmark University."),
    ("Harbour Works", "Harbour Works is the brick factory of Larkspur Instruments, opened in 1996."),
    ("Quill Sensor", "The Quill Sensor measures the turbidity of river water."),
    ("Omar Rask", "Omar Rask became chief executive of Larkspur Instruments in 2011."),
    ("Dunmere Laboratory", "Dunmere Laboratory is a research site beside the Aske river."),
    ("Heron Buoy", "The Heron Buoy is a floating station that weighs 42 kilograms."),
    ("Lisbon Office", "The Lisbon Office sells sensors to water boards in Portugal."),
    ("Flood Watch", "Flood Watch is a subscription that warns towns of rising rivers."),
    ("Norrvik", "Norrvik is a harbour town at the mouth of the Aske river."),
    ("Ostmark University", "Ostmark University has taught hydrology since 1921."),
    ("Annual Report", "In 2022 Larkspur Instruments sold 31,000 sensors."),
    ("Pike Logger", "The Pike Logger stores river levels on a memory card for a year."),
    ("Aske River", "The Aske river floods the lower town of Norrvik every spring."),
]
OVERRIDES = {  # conf/local: merged key by key over conf/base
    "question_synthesis": {"num_questions": 6, "max_seeds_factor": 2.0, "max_copied": 1.0,
                           "max_passage_words": 30, "progress": False},
    "candidate_scoring": {"grid": {"bm25": [{"k1": [0.6, 1.5], "b": [0.3, 0.9]}]}, "num_docs": 2,
                          "prefilter_depth": 10, "encoders": {}},
    "portfolio_selection": {"k": 2, "k_max": 3, "random_draws": 5},
    "router_training": {"router": {"hidden": 8, "embedding_dim": 4, "max_epochs": 3, "patience": 2},
                        "text_features": {"n_features": 64}, "encoders": []},
    "packaging": {"reader": {"llm": SMALL}, "answer_check": {"questions": 2}},  # on questions the reader wrote
}


def _project(tmp_path: Path) -> Path:
    """A copy of the project's configuration with the overrides in conf/local (the package is installed)."""
    project = tmp_path / "project"
    shutil.copytree(ROOT / "conf", project / "conf", ignore=shutil.ignore_patterns("local"))
    (project / "conf" / "local").mkdir()
    (project / "conf" / "local" / "parameters.yml").write_text(yaml.safe_dump(OVERRIDES))
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    (project / "src").mkdir()
    return project


@pytest.fixture(scope="module")
def documents_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``kedro run`` of the stages up to packaging on a folder holding one passage file."""
    tmp_path = tmp_path_factory.mktemp("documents_only")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "company.jsonl").write_text("".join(json.dumps({"title": t, "text": x}) + "\n" for t, x in PASSAGES))
    project = _project(tmp_path)
    env = {**os.environ, "KEDRO_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1",
           "RAGFOLIO_MLFLOW": "0",  # the code of this checkout, wherever the package is installed from
           "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), *filter(None, [os.environ.get("PYTHONPATH")])])}
    kedro = Path(sys.executable).with_name("kedro")
    out = subprocess.run([str(kedro), "run", f"--pipelines={STAGES}", f"--params=run_name=docs,data_prep.raw_dir={docs}"],
                         cwd=project, env=env, capture_output=True, text=True, timeout=2400)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    return project / "runs" / "docs"


def test_written_questions_are_split_and_reported_as_a_synthetic_test(documents_run: Path) -> None:
    questions = json.loads((documents_run / "02_intermediate/questions.json").read_text())
    assert {q["dataset"] for q in questions} == {"synthetic"}
    assert {q["split"] for q in questions} == {"train", "dev", "test"}
    titles = {t for t, _ in PASSAGES}
    for q in questions:
        assert q["question"] and q["answers"] and all(c["is_supporting"] and c["title"] in titles for c in q["contexts"])
    report = json.loads((documents_run / "08_reporting/question_synthesis.json").read_text())
    assert report["source"] == "synthetic" and report["test"] == "synthetic"
    assert sum(report["questions"].values()) == len(questions) == report["written"]["kept"]
    assert report["written"]["tried"] >= report["written"]["kept"] and report["written"]["calls"] > 0
    store = (documents_run / "07_model_output/synthesis_store.jsonl").read_text().splitlines()
    assert len(store) == report["written"]["tried"]  # every seed tried is stored, for a rerun to resume from


def test_the_served_bundle_answers_a_chat_question(documents_run: Path, tmp_path: Path) -> None:
    served = json.loads((documents_run / "06_models/served.json").read_text())
    bundle = documents_run / "06_models" / served["bundle"]
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert manifest["corpus"]["n_passages"] == len(PASSAGES)  # the team's documents are what is served
    config = write_config(tmp_path / "serving.yml", documents_run / "06_models/served.json", "http://unused",
                          llm=None, llm_process={"mode": "in_process"}, warm_up=False)
    with service_client(config) as client:
        reply = client.post("/v1/chat/completions", json={  # type: ignore[attr-defined]
            "model": "ragfolio", "messages": [{"role": "user", "content": "Who founded Larkspur Instruments?"}]})
    assert reply.status_code == 200, reply.text
    content = reply.json()["choices"][0]["message"]["content"]
    assert content.strip()
