"""The layout the design asks for, read from the code's own imports (module level and inside
functions alike): no import circle inside loo_adapt, the array core imports nothing above
it, and the estimators import no readers and no Stan backends."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1] / "loo_adapt"
CORE = ("loo_adapt.core", "loo_adapt.transforms", "loo_adapt.models")


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _imports() -> dict[str, set[str]]:
    mods = _modules()
    edges = {m: set() for m in mods}
    for m, p in mods.items():
        pkg = m if p.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[:len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for t in targets:
                while t and t not in mods:
                    t = t.rsplit(".", 1)[0] if "." in t else ""
                if t and t not in (m, "loo_adapt"):
                    edges[m].add(t)
                    break
    return edges


def _cycles(edges) -> list[list[str]]:
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle():
    assert _cycles(_imports()) == []


def test_the_cycle_finder_sees_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_array_core_imports_nothing_above_it():
    bad = {m: sorted(t for t in ts if not t.startswith(CORE))
           for m, ts in _imports().items() if m.startswith(CORE)}
    assert {m: ts for m, ts in bad.items() if ts} == {}


def test_estimators_import_no_readers_or_backends():
    edges = _imports()
    bad = {m: sorted(t for t in ts if t.startswith(("loo_adapt.io", "loo_adapt.stan",
                                                      "loo_adapt.evaluation", "loo_adapt.cli")))
           for m, ts in edges.items() if m.startswith("loo_adapt.estimators")}
    assert {m: ts for m, ts in bad.items() if ts} == {}
