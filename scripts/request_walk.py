"""How a request's ``l`` and ``num_docs`` travel: the figures of issue 47's "one way through a request".

    PYTHONPATH=src python scripts/request_walk.py [--src src/ragfolio] [--json]

Static counts (read with :mod:`ast`, nothing imported), over every module of ``--src`` and over the
modules a request passes through (:data:`REQUEST_PATH`):

- **defaults of l**, **of num_docs**, **of the default_l setting**: expressions that put a default in
  place of a missing value (``x or default``, ``default if x is None else x``, ``if x is None: x =
  ...``) where ``x`` is named ``l`` (``l``, ``*.l``, ``.get("l")``), ``num_docs`` (``num_docs``,
  ``*.num_docs``) or ``default_l`` (``*.default_l``: the service's setting, None for the bundle's).
- **or fallbacks**: the ``x or default`` ones among them (``l or default_l``).
- **range checks of l**: comparisons of an ``l`` (``l``, ``*.l``, ``default_l``, ``*.default_l``) with
  a bound of the portfolio (``k``, ``*.k``, ``len(...)``) or chained ``1 <= l <= ...`` (a ``while``
  loop's test is not a check), and calls of a
  range-checking helper named ``_check`` with ``"l"`` or ``"default_l"`` as its first argument.
- **check_l calls**: calls of a function named ``check_l``.

The walk (dynamic): a :class:`ragfolio.serving.engine.ServingEngine` on the tests' tiny bundles
(``tests/serving/tiny_bundle.py``) answers ``engine.retrieve`` under :func:`sys.setprofile`, in the
calling thread. The walk keeps the calls of ragfolio functions handed the request (an argument
named ``l``, ``ls``, ``capped``, ``num_docs``, ``depth``, ``item(s)``, ``request(s)`` or
``plan(s)``), and every call of member execution (``PortfolioExecutor.run*``: walked into, its
inside not walked), up to the last call of member execution; its **returns** are the returns
before that call (the request went back up before it went down to the members; also counted up to
the first call of member execution, which for a post-retrieval router is the routing's own run of
the k members), its **stays** the runs of consecutive events in one module, its **module returns**
the stays less the modules (how often it went back into a module it had left), and **visits** per
module. Scenarios: a query-only router at the bundle's ``num_docs`` and at another; a
post-retrieval router at an unrouted l and at a routed l at another ``num_docs``; each from
``engine.retrieve(query, l, num_docs)`` (the request resolved inside) and as the service runs it,
``engine.retrieve_many(items)`` with the items made where the request was parsed.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REQUEST_PATH = ("ragfolio/serving/", "ragfolio/core/system/", "ragfolio/core/routing/online.py",
                "ragfolio/core/routing/base.py", "ragfolio/core/routing/routers/",
                "ragfolio/core/retrieval/running/member_executor.py", "ragfolio/tracking/model.py")
L_NAMES = {"l", "num_docs", "default_l"}
KIND = {"l": "defaults_l", "num_docs": "defaults_num_docs", "default_l": "defaults_setting"}
EXECUTION = "core/retrieval/running/member_executor.py"  # member execution: walked into, not through
RUNS = "PortfolioExecutor.run"  # its entry points: run, run_batch, run_plans
WALK_ARGS = {"l", "ls", "capped", "num_docs", "depth", "depths", "item", "items", "request", "requests", "plan",
             "plans"}


def _name(node: ast.AST) -> str | None:
    """``l`` of ``l``, ``item.l``, ``params.get("l")``; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and node.args and isinstance(node.args[0], ast.Constant)):
        return str(node.args[0].value)
    return None


def _is_none_test(node: ast.AST) -> str | None:
    """The name ``x`` of ``x is None``, else None."""
    if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Is)
            and isinstance(node.comparators[0], ast.Constant) and node.comparators[0].value is None):
        return _name(node.left)
    return None


def _bound(node: ast.AST) -> bool:
    """A portfolio bound: ``k``, ``*.k``, ``len(...)``."""
    return (_name(node) == "k") or (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                                    and node.func.id == "len")


def static_counts(src: Path) -> dict[str, list[str]]:
    """``{figure: ["path:line", ...]}`` (module docstring)."""
    out: dict[str, list[str]] = {"defaults_l": [], "defaults_num_docs": [], "defaults_setting": [], "or_fallbacks": [],
                                 "range_checks_l": [], "check_l_calls": []}
    for path in sorted(src.rglob("*.py")):
        where = path.relative_to(src.parent).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        loops = {id(node.test) for node in ast.walk(tree) if isinstance(node, ast.While)}  # not checks
        for node in ast.walk(tree):
            at = f"{where}:{getattr(node, 'lineno', 0)}"
            if (isinstance(node, ast.BoolOp) and isinstance(node.op, ast.Or) and len(node.values) == 2
                    and (name := _name(node.values[0])) in L_NAMES):
                out[KIND[name]].append(at)
                out["or_fallbacks"].append(at)
            elif isinstance(node, ast.IfExp) and (name := _is_none_test(node.test)) in L_NAMES:
                out[KIND[name]].append(at)
            elif (isinstance(node, ast.If) and (name := _is_none_test(node.test)) in L_NAMES and node.body
                  and isinstance(node.body[0], ast.Assign)):
                out[KIND[name]].append(at)
            elif (isinstance(node, ast.Compare) and id(node) not in loops
                  and not isinstance(node.ops[0], ast.Is | ast.IsNot | ast.In | ast.NotIn)):
                parts = [node.left, *node.comparators]
                ls = [p for p in parts if _name(p) in {"l", "default_l"}]
                chained = (len(parts) == 3 and isinstance(parts[0], ast.Constant) and parts[0].value == 1
                           and _name(parts[1]) in {"l", "default_l"})
                if ls and (chained or any(_bound(p) for p in parts if p not in ls)):
                    out["range_checks_l"].append(at)
            elif isinstance(node, ast.Call) and _name(node.func) == "check_l":
                out["check_l_calls"].append(at)
            elif (isinstance(node, ast.Call) and _name(node.func) == "_check" and node.args
                  and isinstance(node.args[0], ast.Constant) and node.args[0].value in ("l", "default_l")):
                out["range_checks_l"].append(at)
    return out


class Walk:
    """The request's calls and returns in ragfolio code (module docstring)."""

    def __init__(self, src: Path) -> None:
        self.src = str(src.resolve())
        self.events: list[tuple[str, str, str]] = []  # (call|return, module, qualname)
        self._kept: set[int] = set()
        self._inside: int | None = None  # the member execution frame the walk is in (its inside not walked)

    def _carries(self, frame: FrameType) -> bool:
        code = frame.f_code
        if not code.co_filename.startswith(self.src):
            return False
        n = code.co_argcount + code.co_kwonlyargcount
        return bool(WALK_ARGS & set(code.co_varnames[:n]))

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if self._inside is not None:
            if event == "return" and id(frame) == self._inside:
                self._inside = None
                self._log("return", frame)
            return
        if (event == "call" and frame.f_code.co_filename.endswith(EXECUTION)
                and frame.f_code.co_qualname.startswith(RUNS)):
            self._inside = id(frame)
            self._log("call", frame)
        elif event == "call" and self._carries(frame):
            self._kept.add(id(frame))
            self._log("call", frame)
        elif event == "return" and id(frame) in self._kept:
            self._kept.discard(id(frame))
            self._log("return", frame)

    def _log(self, event: str, frame: FrameType) -> None:
        module = Path(frame.f_code.co_filename).resolve().relative_to(Path(self.src).parent).as_posix()
        self.events.append((event, module, frame.f_code.co_qualname))

    def figures(self) -> dict[str, Any]:
        runs = [i for i, (e, m, q) in enumerate(self.events) if e == "call" and m.endswith(EXECUTION)
                and q.startswith(RUNS)]
        first, last = (runs[0], runs[-1]) if runs else (-1, -1)
        back = [f"{m}:{q}" for i, (e, m, q) in enumerate(self.events) if e == "return" and i < last]
        modules = [m for _, m, _ in self.events[: last + 1]]
        stays = [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]
        return {"returns": len(back), "returns_to_first_run": sum(1 for i, (e, _, _) in enumerate(self.events)
                                                                 if e == "return" and i < first),
                "stays": len(stays), "modules": len(set(modules)), "module_returns": len(stays) - len(set(modules)),
                "visits": dict(Counter(stays).most_common()), "returned": back,
                "calls": [f"{m}:{q}" for e, m, q in self.events[: last + 1] if e == "call"]}


def _traced(src: Path, call: Callable[[], Any]) -> dict[str, Any]:
    """The walk of ``call()`` (module docstring)."""
    tracer = Walk(src)
    sys.setprofile(tracer)
    try:
        call()
    finally:
        sys.setprofile(None)
    return tracer.figures()


def walk(src: Path) -> dict[str, Any]:
    """The walk of each scenario (module docstring)."""
    sys.path.insert(0, str(ROOT / "tests" / "serving"))
    from tiny_bundle import questions, write_tiny_bundle

    from ragfolio.serving.config import ServingConfig
    from ragfolio.serving.engine import RetrievalItem, ServingEngine

    llm = {"kind": "openai", "openai": {"base_url": "http://127.0.0.1:9/v1", "model": "none", "api": "completions"}}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, routed_ls, scenarios in (
            ("learned", None, {"query router, l=2": (2, None), "query router, l=3, num_docs=2": (3, 2)}),
            ("post_retrieval", (1,), {"post-retrieval, unrouted l=2": (2, None),
                                      "post-retrieval, l=1, num_docs=2": (1, 2)}),
        ):
            path = Path(tmp) / kind
            write_tiny_bundle(path, kind, routed_ls=routed_ls)
            engine = ServingEngine(ServingConfig(bundle=str(path), llm=llm, max_num_docs=10))
            query = questions()[0]
            for name, (l, num_docs) in scenarios.items():  # noqa: E741
                engine.retrieve(query, l, num_docs)  # the corpus parts and views built
                out[name] = _traced(src, lambda: engine.retrieve(query, l, num_docs))  # noqa: B023 - called at once
                # the service's way: the item made where the request is parsed, then the batcher's call
                items = [engine.item(query, l, num_docs) if hasattr(engine, "item") else RetrievalItem(query, l, num_docs)]
                out[f"{name} (service: retrieve_many)"] = _traced(src, lambda: engine.retrieve_many(items))  # noqa: B023
            engine.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src" / "ragfolio")
    parser.add_argument("--json", action="store_true", help="everything, as JSON")
    parser.add_argument("--no-walk", action="store_true", help="the static counts only")
    args = parser.parse_args()
    figures: dict[str, Any] = {"static": static_counts(args.src)}
    if not args.no_walk:
        figures["walk"] = walk(args.src)
    if args.json:
        print(json.dumps(figures, indent=1))
        return
    for name, places in figures["static"].items():
        on_path = [p for p in places if p.startswith(REQUEST_PATH)]
        print(f"{name}: {len(places)} ({len(on_path)} on the request path)  {' '.join(places)}")
    for name, w in figures.get("walk", {}).items():
        print(f"walk [{name}]: returns {w['returns']} ({w['returns_to_first_run']} to the first member run), "
              f"stays {w['stays']} in {w['modules']} modules ({w['module_returns']} back into a module); "
              f"visits {w['visits']}")


if __name__ == "__main__":
    main()
