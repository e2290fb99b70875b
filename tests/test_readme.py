"""Every shell command the README and docs/ show names things that exist: programs, pipelines,
parameters, modules, scripts, make targets, sub-commands and their options.

Each ```bash block is read line by line (continuations joined, comments dropped, ``&&`` / ``;`` /
``|`` split). A command is checked by what it starts with: ``.venv/bin/<tool>`` (or a bare
``kedro``/``dvc``/``bentoml``/``mlflow``, as docs/serving.md writes them) must be a program of the
venv; ``kedro run`` must name registered pipelines with ``--pipelines`` and parameters that
``conf/base`` holds (or the runtime ones); ``python -m`` a module that imports; a path under
``benchmarks/`` or ``scripts/`` a file; ``make`` a target of the Makefile; and the sub-command of
``dvc``, ``bentoml`` and ``mlflow`` must exist with every option given (its ``--help`` lists it).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "notebooks" / "README.md"]
BIN = Path(sys.executable).parent
TOOLS = {"kedro", "dvc", "bentoml", "mlflow", "python", "pip", "ruff", "mypy"}
RUNTIME_PARAMS = {"run_name", "data_root", "overwrite_sample"}
OPTIONAL_MODULES: set[str] = set()  # modules of optional extras (none now)
ASSIGNMENT = re.compile(r"^[A-Z_][A-Z0-9_]*=")


def commands(path: Path) -> list[tuple[str, list[str]]]:
    """``(where, argv)`` of each command in the ```bash blocks of ``path``."""
    found, in_block, pending, lineno = [], False, "", 0
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):  # noqa: B007
        if line.strip().startswith("```"):
            in_block = line.strip() == "```bash"
            continue
        if not in_block:
            continue
        line = pending + line
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        try:
            tokens = shlex.split(line, comments=True)
        except ValueError:
            continue
        argv: list[str] = []
        for token in [*tokens, "&&"]:
            if token in ("&&", ";", "|", "||"):
                while argv and ASSIGNMENT.match(argv[0]):
                    argv.pop(0)
                if argv:
                    found.append((f"{path.relative_to(ROOT)}:{lineno}", argv))
                argv = []
            else:
                argv.append(token)
    return found


ALL = [(where, argv) for path in DOCS for where, argv in commands(path)]


@cache
def _help(tool: str, sub: str) -> str:
    out = subprocess.run([str(BIN / tool), *sub.split(), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{tool} {sub} --help failed: {out.stderr[-500:]}"
    return out.stdout


@cache
def _parameters() -> dict[str, object]:
    params: dict[str, object] = {}
    for file in (ROOT / "conf" / "base").glob("parameters_*.yml"):
        params.update(yaml.safe_load(file.read_text()) or {})
    return params


def _check_params(where: str, value: str) -> None:
    for pair in value.split(","):
        key = pair.split("=", 1)[0]
        if key in RUNTIME_PARAMS:
            continue
        node: object = _parameters()
        for part in key.split("."):
            assert isinstance(node, dict) and part in node, f"{where}: --params key {key!r} is not in conf/base"
            node = node[part]


def _check_kedro(where: str, args: list[str]) -> None:
    from ragfolio.pipeline_registry import register_pipelines

    assert not any(a.startswith("--pipeline=") or a == "--pipeline" for a in args), f"{where}: use --pipelines"
    if args[:1] != ["run"]:
        return
    for arg in args[1:]:
        if arg.startswith("--pipelines="):
            unknown = set(arg.split("=", 1)[1].split(",")) - set(register_pipelines())
            assert not unknown, f"{where}: no pipeline {sorted(unknown)}"
        elif arg.startswith("--params="):
            _check_params(where, arg.split("=", 1)[1])


def _check_options(where: str, tool: str, args: list[str]) -> None:
    words = [a for a in args if not a.startswith("-")]
    sub = " ".join(words[:2] if tool == "dvc" and words[:1] in (["metrics"], ["plots"], ["params"], ["remote"]) else words[:1])
    text = _help(tool, sub)
    for arg in args:
        if arg.startswith("--"):
            assert arg.split("=", 1)[0] in text, f"{where}: `{tool} {sub}` has no option {arg}"


@pytest.mark.parametrize(("where", "argv"), ALL, ids=[where for where, _ in ALL])
def test_the_command_names_what_exists(where: str, argv: list[str]) -> None:
    program, args = argv[0], argv[1:]
    tool = program.removeprefix(".venv/bin/") if program.startswith(".venv/bin/") else program
    if program.startswith(".venv/bin/") or tool in TOOLS:
        assert (BIN / tool).exists(), f"{where}: the venv has no {tool}"
    if tool in ("python", "python3"):
        if args[:1] == ["-m"]:
            module = args[1]
            assert module in OPTIONAL_MODULES or importlib.util.find_spec(module) is not None, f"{where}: no module {module}"
        elif args and args[0].endswith(".py"):
            assert (ROOT / args[0]).is_file(), f"{where}: no file {args[0]}"
    elif tool == "kedro":
        _check_kedro(where, args)
    elif tool in ("dvc", "bentoml", "mlflow") and args:
        _check_options(where, tool, args)
    elif program == "make":
        targets = re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), flags=re.M)
        assert all(a in targets for a in args if not a.startswith("-")), f"{where}: make has no target {args}"
    elif program.startswith(("benchmarks/", "scripts/", "../shared/")):
        assert (ROOT / program).exists() or program.startswith("../shared/"), f"{where}: no file {program}"


def test_the_docs_show_commands() -> None:
    assert len(ALL) > 40 and any(argv[:2] == [".venv/bin/dvc", "repro"] for _, argv in ALL)


README_MAX_LINES = 220  # the README is the quickstart; the manual is docs/ (docs/index.md)
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


def _prose(path: Path) -> list[tuple[int, str]]:
    """``(line number, line)`` of ``path`` outside fenced code blocks, inline code removed."""
    lines, fenced = [], False
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append((lineno, re.sub(r"`[^`]*`", "", line)))
    return lines


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def _headings(path: Path) -> frozenset[str]:
    """The anchors of ``path``'s headings outside code blocks, as GitHub makes them (inline code
    included; a repeated heading gets ``-1``, ``-2``, ...)."""
    fenced, found, counts = False, set(), {}
    for line in path.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (match := HEADING.match(line)):
            slug = _slug(match.group(1))
            n = counts.get(slug, 0)
            counts[slug] = n + 1
            found.add(slug if n == 0 else f"{slug}-{n}")
    return frozenset(found)


def _links(path: Path) -> list[tuple[str, str]]:
    """``(where, target)`` of every relative markdown link of ``path`` outside code."""
    return [(f"{path.relative_to(ROOT)}:{lineno}", target) for lineno, line in _prose(path)
            for target in LINK.findall(line) if not re.match(r"^[a-z][a-z+.-]*:", target)]


LINKS = [link for path in DOCS for link in _links(path)]


@pytest.mark.parametrize(("where", "target"), LINKS, ids=[f"{w}:{t}" for w, t in LINKS])
def test_the_link_resolves(where: str, target: str) -> None:
    source = ROOT / where.rsplit(":", 1)[0]
    file, _, anchor = target.partition("#")
    path = (source.parent / file).resolve() if file else source
    assert path.exists(), f"{where}: {target} names no file"
    if anchor and path.suffix == ".md":
        assert anchor in _headings(path), f"{where}: {target}: {path.name} has no heading with the anchor #{anchor}"


def test_the_links_are_checked() -> None:
    assert len(LINKS) > 100 and any("#" in target for _, target in LINKS)
    assert _slug("The reader: Qwen2.5-Coder-1.5B-Instruct on llama.cpp (issue 34)") == (
        "the-reader-qwen25-coder-15b-instruct-on-llamacpp-issue-34")
    assert _slug("`make run` and `make test` on a fresh clone") == "make-run-and-make-test-on-a-fresh-clone"


def test_the_readme_is_a_quickstart() -> None:
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES}): move detail to docs/"


def test_the_docs_index_lists_every_doc() -> None:
    index = ROOT / "docs" / "index.md"
    linked = {(index.parent / target.partition("#")[0]).resolve() for _, target in _links(index)}
    unlisted = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p != index and p.resolve() not in linked]
    assert not unlisted, f"docs/index.md does not link {unlisted}"
