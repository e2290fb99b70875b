"""code_identity: the import graph (what a DVC stage's code deps are made of) and package versions."""

from __future__ import annotations

from pathlib import Path

from ragfolio.core import code_identity


def _package(root: Path) -> Path:
    files = {
        "ragfolio/__init__.py": "",
        "ragfolio/a.py": "from . import b\n\n\ndef later():\n    import ragfolio.c\n",
        "ragfolio/b.py": "import os\nfrom ragfolio.sub import d\n",
        "ragfolio/c.py": "",
        "ragfolio/sub/__init__.py": "",
        "ragfolio/sub/d.py": "",
        "ragfolio/unused.py": "",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_the_closure_follows_relative_submodule_and_function_imports_and_parent_packages(tmp_path) -> None:
    src = _package(tmp_path)
    seeds = code_identity.module_files("ragfolio.a", src)
    names = {code_identity.module_name(p, src) for p in code_identity.closure(seeds, src)}
    assert names == {"ragfolio", "ragfolio.a", "ragfolio.b", "ragfolio.c", "ragfolio.sub", "ragfolio.sub.d"}


def test_follow_cuts_an_import_and_what_only_it_reaches(tmp_path) -> None:
    src = _package(tmp_path)
    b = src / "ragfolio/b.py"
    kept = code_identity.closure(code_identity.module_files("ragfolio.a", src), src, lambda importer, imported: importer != b)
    assert {code_identity.module_name(p, src) for p in kept} == {"ragfolio", "ragfolio.a", "ragfolio.b", "ragfolio.c"}


def test_package_versions_name_an_absent_package() -> None:
    versions = code_identity.package_versions(["numpy", "no-such-package-ragfolio"])
    assert versions["numpy"][0].isdigit() and versions["no-such-package-ragfolio"] == "absent"
