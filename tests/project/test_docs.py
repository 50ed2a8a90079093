"""The README is a front door and docs/ holds the rest by topic: every link and file path in them
resolves, no doc and no runtime module names an issue number, the README stays short, its Python example runs, and the
speed figures it and docs/RESULTS.md quote are the ones the default samplers were chosen by
(engine.samplers.DEFAULT_SAMPLERS), so a re-measured default cannot leave the docs behind."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
#: a markdown link's target, without its #anchor
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
#: a file path a doc names (`docs/STORAGE.md`, `engine/api.py`, `test_rounds.py`); placeholders such
#: as `<name>` or `{text,code}` are not paths
CITED = re.compile(r"(?<![\w./<>{}*$-])((?:[\w.-]+/)*[\w-]+\.(?:md|py|sh|json|txt|ini|png))(?![\w/])")
SKIP = {".git", ".venv", "data", ".mutation", "test-artifacts", "runs", "__pycache__", "node_modules"}


def _repo_names() -> set[str]:
    """Base names of the repository's files (a doc may name a module by its file name alone)."""
    names = set()
    for _folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP]
        names.update(files)
    return names


def broken_references(doc: Path, names: set[str]) -> list[str]:
    """Links and file paths of a markdown file that resolve neither from the repository root nor from
    the file's folder (a bare file name may live anywhere in the repository)."""
    text = doc.read_text()
    out = []
    for target in LINK.findall(text):
        if "://" not in target and not target.startswith("mailto:") and not (doc.parent / target).exists():
            out.append(f"{doc.relative_to(ROOT)}: link {target}")
    for cited in CITED.findall(text):
        if (ROOT / cited).exists() or (doc.parent / cited).exists() or ("/" not in cited and cited in names):
            continue
        out.append(f"{doc.relative_to(ROOT)}: path {cited}")
    return out


def test_links_and_paths_in_the_docs_resolve():
    names = _repo_names()
    broken = [b for doc in [README, *DOCS] for b in broken_references(doc, names)]
    assert not broken, "links or paths to files the repository lacks:\n" + "\n".join(broken)


def test_the_checker_sees_a_broken_link_and_a_stale_path():
    probe = ROOT / "docs" / "_probe_links.md"
    probe.write_text("See [design](DESIGN.md), [gone](GONE.md), `engine/api.py`, `engine/nowhere.py`,\n"
                     "`test_rounds.py`, `no_such_module.py` and [a site](https://example.org/x.md).\n")
    try:
        found = broken_references(probe, _repo_names())
    finally:
        probe.unlink()
    assert [f.split(": ", 1)[1] for f in found] == ["link GONE.md", "path GONE.md", "path engine/nowhere.py",
                                                   "path no_such_module.py"]


def test_no_doc_names_an_issue_number():
    pattern = re.compile(r"\bissues? #?\d+|\(#\d+\)", re.IGNORECASE)
    hits = [f"{doc.relative_to(ROOT)}:{i} {line.strip()}" for doc in [README, *DOCS]
            for i, line in enumerate(doc.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, "docs name issue numbers (say what holds now instead):\n" + "\n".join(hits)


#: the packages whose code is read as it is, not as it came to be
CODE = ("app", "engine", "storage", "lab")


def test_no_runtime_code_names_an_issue_number():
    """The docs' rule, for code: a comment or docstring says why, not which issue asked for it."""
    pattern = re.compile(r"\bissues? #?\d+|\(#\d+\)", re.IGNORECASE)
    hits = [f"{py.relative_to(ROOT)}:{i} {line.strip()}" for top in CODE
            for py in sorted((ROOT / top).rglob("*.py")) if "tests" not in py.relative_to(ROOT).parts
            for i, line in enumerate(py.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, "code names issue numbers (say why instead):\n" + "\n".join(hits)


def test_the_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; the rest belongs in docs/ by topic"
    for doc in DOCS:  # every topic is reachable from it
        if doc.name != "profile_calls.md":
            assert f"(docs/{doc.name})" in README.read_text(), f"README.md does not link docs/{doc.name}"


def test_the_readme_python_example_runs():
    """The first ```python block of the README, as a reader would paste it, in a fresh interpreter on
    the bundled models: it must finish and print a completed text with no mask left."""
    block = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert block, "README.md has no Python example"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", block.group(1)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "def add(a, b):" in done.stdout and "[MASK" not in done.stdout


@pytest.mark.parametrize("domain", ["text", "code", "protein"])
def test_the_docs_quote_the_speed_the_defaults_were_chosen_by(domain):
    from engine.samplers import DEFAULT_SAMPLERS

    c = DEFAULT_SAMPLERS[domain]
    readme_row = re.compile(rf"\|\s*{domain}\s*\|\s*{re.escape(c.sampler)}\s*\|\s*{c.ratio:.2f}x\s*\|")
    assert readme_row.search(README.read_text()), f"README.md's speed table lacks {domain} {c.sampler} {c.ratio:.2f}x"
    lo, hi = c.ratio_range
    cell = f"{c.ratio:.2f}x** [{lo:.2f}-{hi:.2f}]"
    rows = [line for line in (ROOT / "docs" / "RESULTS.md").read_text().splitlines()
            if line.startswith(f"| {domain}, 1 |")]
    assert len(rows) == 1 and cell in rows[0], f"docs/RESULTS.md's {domain} row lacks {c.sampler}'s {cell}"
