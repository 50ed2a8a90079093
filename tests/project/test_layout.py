"""The tree a newcomer walks into: engine/ grouped by the run with a short root (the runtime only: the
research tooling is the top-level lab/ beside it), the page in app/ grouped by what a visitor does, tools apart
from the runtime, and tests/ mirroring the packages (tests/engine/ and tests/app/ down to their subpackages).

Why: a reader finds a concept by its folder (docs/TESTING.md, README "Where things are"). These rules
keep the grouping from silting up again: a module dropped at engine/'s root, a load test beside the
page's modules, or a test file at tests/'s root fails here with the folder it belongs in."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: engine/'s root keeps the API, the CLI and the few modules everything shares
ENGINE_ROOT_MAX = 12
#: the groups of engine/, one per stage of a run (the lab's tooling is not one: it is the top-level lab/)
ENGINE_GROUPS = {"inputs", "loading", "samplers", "models", "exactness"}
#: app/'s root keeps the page's entry points and what every group shares (choices, errors, examples)
APP_ROOT_MAX = 12
#: the groups of app/, one per thing a visitor does
APP_GROUPS = {"run", "views", "stored", "timing", "tabs", "serving"}
#: test folders, one per package, plus the whole-project rules, shared fixtures and the browser suite
TEST_FOLDERS = {"engine", "app", "storage", "lab", "project", "support", "e2e", "mutation", "fixtures"}
#: module names that are tools, never runtime: they live in tools/
TOOL_NAMES = ("loadtest", "soak", "bench", "testing")


def root_modules(pkg: str, root: Path = ROOT) -> list[str]:
    return sorted(p.name for p in (root / pkg).glob("*.py"))


def misplaced(root: Path = ROOT) -> list[str]:
    """Files in a place the layout does not give them, each with where it belongs."""
    out = []
    for pkg, most, groups in (("engine", ENGINE_ROOT_MAX, ENGINE_GROUPS), ("app", APP_ROOT_MAX, APP_GROUPS)):
        mods = root_modules(pkg, root)
        if len(mods) > most:
            out.append(f"{pkg}/ root holds {len(mods)} modules (at most {most}): "
                       f"move some into {sorted(groups)}: {mods}")
        subpackages = sorted(p.name for p in (root / pkg).iterdir() if p.is_dir() and (p / "__init__.py").exists())
        for d in subpackages:
            if d not in groups:
                out.append(f"{pkg}/{d}/ is not one of its groups {sorted(groups)}")
        # tests/<pkg>/ mirrors the package: one test package per subpackage, and no other folder
        tests = root / "tests" / pkg
        for d in subpackages:
            if not (tests / d / "__init__.py").is_file():
                out.append(f"tests/{pkg}/{d}/ is missing (with its __init__.py): {pkg}/{d}/'s tests go there")
        for d in sorted(p.name for p in tests.iterdir() if p.is_dir()) if tests.is_dir() else []:
            if not d.startswith((".", "__")) and d not in subpackages:
                out.append(f"tests/{pkg}/{d}/ mirrors no subpackage of {pkg}/ {subpackages}")
    for pkg in ("app", "storage"):
        for p in (root / pkg).rglob("*.py"):
            if p.stem in TOOL_NAMES or p.stem.startswith(("loadtest", "soak", "bench")):
                out.append(f"{p.relative_to(root)} is a tool: it belongs in tools/")
    for p in (root / "tests").glob("test_*.py"):
        out.append(f"{p.relative_to(root)} sits at tests/'s root: put it in the folder of the package it tests")
    for d in (root / "tests").iterdir():
        if d.is_dir() and not d.name.startswith((".", "__")) and d.name not in TEST_FOLDERS:
            out.append(f"tests/{d.name}/ is not one of {sorted(TEST_FOLDERS)}")
    return out


def test_the_tree_follows_the_layout():
    assert not misplaced(), "\n".join(misplaced())


def test_the_layout_check_sees_what_it_must(tmp_path):
    """A copy of the skeleton with one misplaced file of each kind: each is reported."""
    (tmp_path / "engine" / "inputs").mkdir(parents=True)
    (tmp_path / "engine" / "inputs" / "__init__.py").write_text("")
    for i in range(ENGINE_ROOT_MAX):
        (tmp_path / "engine" / f"m{i}.py").write_text("")
    (tmp_path / "app" / "run").mkdir(parents=True)
    (tmp_path / "app" / "run" / "__init__.py").write_text("")
    for i in range(APP_ROOT_MAX):
        (tmp_path / "app" / f"m{i}.py").write_text("")
    (tmp_path / "storage").mkdir()
    for tests in ("engine/inputs", "app/run"):
        (tmp_path / "tests" / tests).mkdir(parents=True)
        (tmp_path / "tests" / tests / "__init__.py").write_text("")
    assert misplaced(tmp_path) == []
    (tmp_path / "engine" / "samplers").mkdir()  # a group whose tests have no folder yet
    (tmp_path / "engine" / "samplers" / "__init__.py").write_text("")
    (tmp_path / "tests" / "app" / "odds").mkdir()  # a test folder that mirrors nothing
    (tmp_path / "engine" / "one_more.py").write_text("")
    (tmp_path / "engine" / "stuff").mkdir()
    (tmp_path / "engine" / "stuff" / "__init__.py").write_text("")
    (tmp_path / "engine" / "lab").mkdir()  # the tooling's old home: it lives in the top-level lab/ now
    (tmp_path / "engine" / "lab" / "__init__.py").write_text("")
    (tmp_path / "app" / "loadtest.py").write_text("")  # also the app root's 13th module
    (tmp_path / "app" / "misc").mkdir()
    (tmp_path / "app" / "misc" / "__init__.py").write_text("")
    (tmp_path / "storage" / "bench.py").write_text("")
    (tmp_path / "tests" / "test_flat.py").write_text("")
    (tmp_path / "tests" / "misc").mkdir()
    found = "\n".join(misplaced(tmp_path))
    for needle in ("engine/ root holds 13", "engine/stuff/", "engine/lab/", "app/loadtest.py", "storage/bench.py",
                   "app/ root holds 13", "app/misc/",
                   "tests/test_flat.py", "tests/misc/", "tests/engine/samplers/ is missing",
                   "tests/app/odds/ mirrors no subpackage"):
        assert needle in found, (needle, found)
