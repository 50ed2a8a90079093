"""No import circles in app/, engine/, lab/ and storage/ (issue 23).

Why: a circle means two modules can only be understood together, and it makes the import order
matter (a name half-defined while the other module reads it). The scan reads every file's
imports from its syntax tree, function-level imports and `if TYPE_CHECKING:` ones included (they
are circles too, only deferred or on paper: the two modules still cannot be read apart).
`from pkg import name` is an edge to the module pkg.name when that is a module, else to pkg.

KNOWN_CYCLES lists the circles that existed when this test was written; the helper who breaks one
removes it here (the test fails when a listed circle is gone, so the list cannot go stale).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "engine", "lab", "storage")

#: circles present on 2026-11-25 (issue 23), each as its sorted module set; to be emptied
KNOWN_CYCLES: set[frozenset[str]] = set()  # emptied: the three circles of 2026-11-25 are gone


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(path: Path, modules: set[str], root: Path = ROOT) -> set[str]:
    """The modules in `modules` that the file at `path` imports (relative imports resolved)."""
    me = module_name(path, root)
    pkg = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in modules:
                    out.add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            for a in node.names:
                sub = f"{mod}.{a.name}"
                if sub in modules:
                    out.add(sub)
                elif mod in modules:
                    out.add(mod)
    out.discard(me)
    return out


def import_graph(root: Path = ROOT, packages=PACKAGES) -> dict[str, set[str]]:
    files = [p for d in packages for p in (root / d).rglob("*.py")]
    modules = {module_name(p, root) for p in files}
    return {module_name(p, root): imports_of(p, modules, root) for p in files}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on: set[str] = set()
    stack: list[str] = []
    found: list[frozenset[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(frozenset(comp))
    return found


def test_no_new_import_cycles():
    found = set(cycles(import_graph()))
    new = found - KNOWN_CYCLES
    assert not new, "import circles: " + "; ".join(" <-> ".join(sorted(c)) for c in new)


def test_known_cycles_still_exist():
    """A broken circle leaves the allow-list: remove it from KNOWN_CYCLES (this keeps the list honest)."""
    gone = KNOWN_CYCLES - set(cycles(import_graph()))
    assert not gone, "no longer circular, remove from KNOWN_CYCLES: " + "; ".join(
        " <-> ".join(sorted(c)) for c in gone)


def test_the_checker_finds_a_circle(tmp_path):
    """The scan sees a circle made of a relative, a function-level and a package-level import,
    one closed by an import under `if TYPE_CHECKING:`, and no circle in a plain chain."""
    pkg = tmp_path / "app"
    (pkg / "tabs").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "tabs" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("def f():\n    from .tabs import c\n")
    (pkg / "tabs" / "c.py").write_text("from .. import a\n")
    (pkg / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .g import y\n")
    (pkg / "g.py").write_text("from . import d\n")
    (pkg / "e.py").write_text("import app.d\n")
    (pkg / "f.py").write_text("from app import e\n")
    graph = import_graph(tmp_path, ("app",))
    assert graph["app.f"] == {"app.e"} and graph["app.e"] == {"app.d"}
    assert set(cycles(graph)) == {frozenset({"app.a", "app.b", "app.tabs.c"}), frozenset({"app.d", "app.g"})}
