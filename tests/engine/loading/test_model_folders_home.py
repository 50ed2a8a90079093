"""ASSETS (where the bundled checkpoints are) lives in engine/loading/folders.py since the registry was
split (issue 23). Tests and fixtures point the studio at tiny models by assigning it; an assignment
to the old `registry.ASSETS` would now create a new attribute that nothing reads, silently, and the
test would run on the bundled models instead. This scan keeps that mistake from coming back."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OLD_HOME = re.compile(r"\bregistry\.ASSETS\b|setattr\(\s*registry\s*,\s*[\"']ASSETS[\"']")


def test_nobody_points_the_old_registry_assets():
    files = [p for d in ("tests", "app", "engine", "lab", "storage") for p in (ROOT / d).rglob("*.py")
             if p.resolve() != Path(__file__).resolve()]
    offenders = [f"{p.relative_to(ROOT)}:{i}" for p in files
                 for i, line in enumerate(p.read_text().splitlines(), 1) if OLD_HOME.search(line)]
    assert not offenders, f"set engine.loading.folders.ASSETS instead (the registry no longer reads one): {offenders}"


def test_the_registry_has_no_assets_of_its_own():
    from engine.loading import folders as model_folders
    from engine.loading import registry

    assert not hasattr(registry, "ASSETS") and model_folders.ASSETS.name == "models"
