"""Checkpoint folders by name: the bundled ones in assets/models and those an operator lists in
INFILL_MODEL_DIRS (colon-separated; each a checkpoint folder or a folder of them), and each
model's card (metrics.json).

Its own module because the Hub (engine/loading/hub.py), the loader (engine/loading/loaded_model.py) and the
listing (engine/loading/registry.py) all ask "which folders are there?", and a broken operator folder
must be skipped, with one warning, in one place."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from engine.errors import BadModelError
from engine.loading.checkpoint import check_folder

ASSETS = Path(__file__).resolve().parents[2] / "assets" / "models"
KIND_BY_TYPE = {"asarm": "asarm", "xlnet": "asarm", "hybrid": "hybrid", "judge": "judge", "ptp": "ptp"}
log = logging.getLogger("engine.loading.registry")  # the name operators filter their logs on


def listed_folders() -> dict[str, Path]:
    """Listed checkpoint folders by name. A folder that fails engine/loading/checkpoint.py's checks is
    skipped with a warning naming it and why: one broken operator folder must not take down the
    others (a truncated config.json disabled every model)."""
    roots = [ASSETS] + [Path(p) for p in os.environ.get("INFILL_MODEL_DIRS", "").split(":") if p]
    found: dict[str, Path] = {}
    for root in roots:
        subs = [root] if (root / "config.json").is_file() else (sorted(root.iterdir()) if root.is_dir() else [])
        for sub in subs:
            if (sub / "config.json").is_file() and sub.name not in found and _usable(sub):
                found[sub.name] = sub
    return found


#: what each folder's last warning was about: (folder, topic) -> the folder's state then
_warned: dict[tuple[str, str], object] = {}
_WARNED_MAX = 4096


def _state(path: Path) -> tuple:
    """What changes when an operator edits a folder: its files' names, sizes and times."""
    try:
        return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in path.iterdir() if p.is_file()))
    except OSError:
        return ()


def warn_on_change(folder: Path, topic: str, state: object, msg: str, *args: object) -> None:
    """Log a warning about a model folder once per change of it: the listing runs on every page
    event, and an unreadable metrics.json logged dozens of lines a second. `state` is
    what the warning depends on; the same warning comes again only after it changed."""
    key = (str(folder), topic)
    if _warned.get(key) == state:
        return
    if len(_warned) >= _WARNED_MAX:
        _warned.clear()
    _warned[key] = state
    log.warning(msg, *args)


def _usable(folder: Path) -> bool:
    """Whether a listed folder passes the checkpoint checks; a warning (once per change of the
    folder) names the one that does not."""
    try:
        check_folder(folder, KIND_BY_TYPE)
        return True
    except BadModelError as e:
        warn_on_change(folder, "checks", (str(e), _state(folder)), "skipping model folder %s: %s", folder, e)
        return False


def read_card(path: Path) -> dict:
    """metrics.json of a folder ({} when absent or unreadable: a card is never worth a failure)."""
    card = path / "metrics.json"
    try:
        data = json.loads(card.read_text()) if card.is_file() else {}
    except (OSError, ValueError) as e:
        warn_on_change(path, "card", (str(e), _state(path)),
                       "model folder %s: metrics.json unreadable (%s); no card shown", path, e)
        return {}
    return data if isinstance(data, dict) else {}

