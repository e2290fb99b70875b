"""requirements.lock and pyproject.toml agree, and this environment is the lock.

`make` installs exactly requirements.lock; pyproject.toml keeps ranges for library users. If one
changes without the other (`make lock` re-resolves), these tests say which package disagrees.
"""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCKED_EXTRAS = ("dev",)  # the extras `make` installs; others (llama) are opt-in and not locked


def locked() -> dict[str, Version]:
    """``{canonical name: version}`` of every ``name==version`` line of requirements.lock."""
    pins = {}
    for number, line in enumerate((ROOT / "requirements.lock").read_text().splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+)==([^\s;]+)", line)
        if match is None:
            raise ValueError(f"requirements.lock:{number}: {line!r} is not an exact pin 'name==version'")
        pins[canonicalize_name(match[1])] = Version(match[2])
    return pins


def project_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in LOCKED_EXTRAS:
        reqs += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return reqs


def _applies(req: Requirement, extras: set[str]) -> bool:
    if req.marker is None:
        return True
    return any(req.marker.evaluate({"extra": e}) for e in extras or {""})


def needed() -> set[str]:
    """Canonical names of everything pyproject.toml needs, walked through installed metadata."""
    names: set[str] = set()
    todo = [(canonicalize_name(r.name), set(r.extras)) for r in project_requirements()]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, frozenset(extras)) in seen:
            continue
        seen.add((name, frozenset(extras)))
        names.add(name)
        for spec in importlib.metadata.requires(name) or []:
            req = Requirement(spec)
            if _applies(req, extras):
                todo.append((canonicalize_name(req.name), set(req.extras)))
    return names


def test_every_pyproject_requirement_is_locked_at_a_version_it_admits() -> None:
    pins = locked()
    for req in project_requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"pyproject.toml needs {req} but requirements.lock has no {name}: run `make lock`"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"requirements.lock pins {name}=={pins[name]}, outside pyproject.toml's {req}: run `make lock`"
        )


def test_the_lock_holds_what_the_project_needs_and_nothing_else() -> None:
    pins, need = set(locked()), needed()
    assert not need - pins, f"needed but not locked: {sorted(need - pins)}: run `make lock`"
    assert not pins - need, f"locked but needed by nothing in pyproject.toml: {sorted(pins - need)}: run `make lock`"


def test_this_environment_is_the_lock() -> None:
    wrong = {
        name: (str(version), importlib.metadata.version(name))
        for name, version in locked().items()
        if Version(importlib.metadata.version(name)) != version
    }
    assert not wrong, f"installed versions differ from requirements.lock (locked, installed): {wrong}"


def test_a_range_the_lock_violates_is_reported(monkeypatch) -> None:
    pins = locked()
    assert pins[canonicalize_name("torch")].public == "2.13.0"  # the CPU build, +cpu
    monkeypatch.setitem(globals(), "project_requirements", lambda: [Requirement("numpy<1")])
    with pytest.raises(AssertionError, match="outside pyproject.toml's numpy<1"):
        test_every_pyproject_requirement_is_locked_at_a_version_it_admits()


def test_the_bento_pins_the_locked_versions() -> None:
    import yaml

    packages = yaml.safe_load((ROOT / "bentofile.yaml").read_text())["python"]["packages"]
    pins = locked()
    for spec in packages:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"bentofile.yaml installs {name}, which requirements.lock does not hold"
        assert str(req.specifier).startswith("=="), f"bentofile.yaml: {spec} is not an exact pin"
        assert req.specifier.contains(pins[name], prereleases=True), f"bentofile.yaml {spec} != lock {pins[name]}"
