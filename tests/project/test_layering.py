"""The runtime never reaches into the research tooling (engine/lab) nor into the tools (tools/: load and soak
tests, benches, tiny-model fixtures): docs/DESIGN.md §1."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = [p for d in ("engine", "app", "storage") for p in (ROOT / d).rglob("*.py")
           if "lab" not in p.relative_to(ROOT).parts]


def _imports(path: Path) -> list[str]:
    """Absolute names of every module the file imports (relative imports resolved)."""
    pkg = list(path.relative_to(ROOT).with_suffix("").parts[:-1])
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            names += [mod] + [f"{mod}.{a.name}" for a in node.names]
    return names


TOOLING = ("engine.lab", "tools")


def _is_tooling(name: str) -> bool:
    return any(name == t or name.startswith(t + ".") for t in TOOLING)


def test_no_runtime_module_imports_the_tooling():
    offenders = {str(p.relative_to(ROOT)): n for p in RUNTIME for n in _imports(p) if _is_tooling(n)}
    assert not offenders, f"runtime modules import the tooling: {offenders}"


def test_the_tooling_rule_names_what_it_must():
    assert _is_tooling("tools.loadtest") and _is_tooling("engine.lab.data") and _is_tooling("tools")
    assert not _is_tooling("toolsmith") and not _is_tooling("engine.labels")


def test_the_checker_sees_a_relative_import_of_the_tooling(tmp_path, monkeypatch):
    """The scan resolves `from ..lab.data import x` inside engine/samplers to engine.lab.data."""
    fake = ROOT / "engine" / "samplers" / "_probe_layering.py"
    fake.write_text("from ..lab.data import load_split\n")
    try:
        assert "engine.lab.data" in _imports(fake)
    finally:
        fake.unlink()


def test_importing_the_engine_loads_no_tooling():
    code = ("import sys, engine, engine.api, engine.samplers, engine.models, engine.loading.registry, engine.cli; "
            "print(sorted(m for m in sys.modules if m.startswith('engine.lab')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
