"""The runtime never reaches into the research tooling (lab/, the top-level package beside engine/) nor into
the tools (tools/: load and soak tests, benches, tiny-model fixtures): docs/DESIGN.md §1.

The one exception is engine/cli.py's dispatch of `python -m engine train|bench|eval|data|report`: it names
the lab module as a string and imports it only when that subcommand runs (DISPATCH below)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = [p for d in ("engine", "app", "storage") for p in (ROOT / d).rglob("*.py")]
#: the runtime files allowed to import the tooling by a string at call time: the CLI's delegated subcommands
DISPATCH = {"engine/cli.py"}


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


TOOLING = ("lab", "engine.lab", "tools")


def _is_tooling(name: str) -> bool:
    return any(name == t or name.startswith(t + ".") for t in TOOLING)


def test_no_runtime_module_imports_the_tooling():
    offenders = {str(p.relative_to(ROOT)): n for p in RUNTIME for n in _imports(p) if _is_tooling(n)}
    assert not offenders, f"runtime modules import the tooling: {offenders}"


def test_the_tooling_rule_names_what_it_must():
    assert _is_tooling("tools.loadtest") and _is_tooling("lab.data") and _is_tooling("lab") and _is_tooling("tools")
    assert _is_tooling("engine.lab.data")  # the lab's old home: it may not grow back inside the engine
    assert not _is_tooling("toolsmith") and not _is_tooling("labels") and not _is_tooling("engine.labels")


def _string_imports(path: Path) -> list[str]:
    """Module names the file imports by a string at call time: importlib.import_module("x...") or
    __import__("x..."), an f-string counted by its literal start (f"lab.{name}" gives "lab.")."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and node.args and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))):
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.append(arg.value)
            elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                names.append(str(arg.values[0].value).rstrip("."))
    return names


def test_only_the_cli_dispatch_names_the_tooling_by_string():
    offenders = {str(p.relative_to(ROOT)): n for p in RUNTIME for n in _string_imports(p)
                 if _is_tooling(n) and p.relative_to(ROOT).as_posix() not in DISPATCH}
    assert not offenders, f"runtime modules import the tooling by a string: {offenders}"


def test_the_cli_dispatch_reaches_the_lab():
    """`python -m engine train|bench|eval|data|report` go to lab.<module>, each with its own cli()."""
    import importlib.util

    from engine.cli import DELEGATED

    assert "lab" in _string_imports(ROOT / "engine" / "cli.py")
    missing = [m for m in DELEGATED.values() if importlib.util.find_spec(f"lab.{m}") is None]
    assert not missing, f"engine.cli.DELEGATED names lab modules that do not exist: {missing}"


def test_the_checker_sees_every_way_an_engine_module_imports_the_tooling():
    """A probe inside engine/samplers: a plain, a from-, a package-level and a function-level import of lab,
    a relative import of the lab's old home, and importlib by string are each found."""
    fake = ROOT / "engine" / "samplers" / "_probe_layering.py"
    fake.write_text("import lab\nfrom lab.data import load_split\nfrom lab import report\nfrom ..lab.x import y\n"
                    "def f():\n    import lab.bench\n    import importlib\n    importlib.import_module(f'lab.{f}')\n")
    try:
        found = [n for n in _imports(fake) if _is_tooling(n)]
        for name in ("lab", "lab.data", "lab.report", "lab.bench", "engine.lab.x"):
            assert name in found, (name, found)
        assert _string_imports(fake) == ["lab"]
    finally:
        fake.unlink()


def test_importing_the_engine_loads_no_tooling():
    code = ("import sys, engine, engine.api, engine.samplers, engine.models, engine.loading.registry, engine.cli; "
            "print(sorted(m for m in sys.modules if m == 'lab' or m.startswith(('lab.', 'engine.lab'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


#: what engine/models/ may import from the engine: models give distributions and know nothing of how
#: they are found and loaded (engine/loading/) or driven (engine/samplers/, the oracle's home)
MODELS_MAY_IMPORT = ("engine.models", "engine.errors", "engine.inputs")


def upward_imports(root: Path = ROOT) -> dict[str, list[str]]:
    """engine/models/ modules -> the engine modules they import beyond MODELS_MAY_IMPORT."""
    out = {}
    for p in sorted((root / "engine" / "models").rglob("*.py")):
        bad = [n for n in _imports_under(p, root) if n.startswith("engine.") and n != "engine"
               and not any(n == a or n.startswith(a + ".") for a in MODELS_MAY_IMPORT)]
        if bad:
            out[str(p.relative_to(root))] = sorted(set(bad))
    return out


def _imports_under(path: Path, root: Path) -> list[str]:
    pkg = list(path.relative_to(root).with_suffix("").parts[:-1])
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            names.append(".".join(base + ([node.module] if node.module else [])))
    return names


def test_models_import_neither_loading_nor_samplers():
    assert not upward_imports(), f"engine/models/ imports upward: {upward_imports()}"


def test_the_upward_import_rule_bites(tmp_path):
    (tmp_path / "engine" / "models").mkdir(parents=True)
    (tmp_path / "engine" / "models" / "ok.py").write_text("from ..errors import X\nfrom .layers import Block\n")
    assert upward_imports(tmp_path) == {}
    (tmp_path / "engine" / "models" / "bad.py").write_text("from engine.loading.device import host64\n"
                                                          "from ..samplers import oracle\n")
    assert upward_imports(tmp_path) == {"engine/models/bad.py": ["engine.loading.device", "engine.samplers"]}
