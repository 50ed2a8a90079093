"""Where models come from, by name: bundled checkpoints in assets/models, plus folders an operator
lists in INFILL_MODEL_DIRS, plus Hugging Face model ids an operator lists in INFILL_MODEL_IDS
(comma-separated, e.g. xlnet/xlnet-base-cased; `NAME@REVISION` allowed). Visitors of the app choose
among these names only; a path or a Hub id is accepted from the Python API and the CLI
(`--model xlnet/xlnet-base-cased`), never from the app.

This module answers "which names exist, what does this name mean, load it" (available, resolve,
load, default_model); the pieces behind it each have their own home: engine/loading/folders.py (the
listed folders and their cards), engine/loading/hub.py (Hub ids, revisions, options, reachability),
engine/loading/loaded_model.py (LoadedModel, the cached and locked load) and engine/loading/threads.py (torch
threads)."""

from __future__ import annotations

from pathlib import Path

import torch

from engine.errors import ModelNotFoundError
from engine.inputs.domains import DOMAINS
from engine.loading.checkpoint import check_folder
from engine.loading.device import resolve_device
from engine.loading.folders import KIND_BY_TYPE, listed_folders, read_card
from engine.loading.hub import hub_config, hub_ids, hub_options, is_hub_spec, split_spec
from engine.loading.loaded_model import LoadedModel, load_source


def available() -> list[dict]:
    """Name, kind, domain and the model card's metrics of every listed checkpoint (nothing loaded).
    An operator-listed Hub id whose config cannot be had (offline, not cached) has kind "?"."""
    rows = []
    for hid in hub_ids():
        cfg = hub_config(*split_spec(hid))
        mt = cfg.get("model_type", "?")
        try:
            code = hub_options(hid).code_map
        except ModelNotFoundError:  # a bad INFILL_HUB_OPTIONS: loading says so; listing never fails
            code = False
        rows.append({"name": hid, "path": hid, "kind": KIND_BY_TYPE.get(mt, mt), "model_type": mt,
                     "domain": cfg.get("domain", "code" if code else "text"), "metrics": {}, "hub_id": hid})
    for name, path in listed_folders().items():
        cfg = check_folder(path, KIND_BY_TYPE)
        mt = cfg.get("model_type", "?")
        rows.append({
            "name": name,
            "path": str(path),
            "kind": KIND_BY_TYPE.get(mt, mt),
            "model_type": mt,
            "domain": cfg.get("domain", "text"),
            "metrics": read_card(path),
        })
    return rows


def resolve(name_or_path: str, allow_paths: bool = True) -> Path | str:
    """A local folder (Path), or a Hugging Face Hub id (str). Listed names come first; with
    allow_paths (the API and the CLI, never the app) also any checkpoint folder or Hub id."""
    cands = listed_folders()
    if name_or_path in cands:
        return cands[name_or_path]
    if name_or_path in hub_ids():
        return name_or_path
    p = Path(name_or_path)
    if allow_paths and (p / "config.json").is_file():
        return p.resolve()
    if allow_paths and is_hub_spec(name_or_path) and not p.exists():
        return name_or_path
    known = ", ".join(sorted(cands) + hub_ids()) or "none"
    raise ModelNotFoundError(f"No model named {name_or_path!r}. Available: {known}.")


def load(name_or_path: str, allow_paths: bool = True, device: str | torch.device | None = None,
         precision: str | None = None) -> LoadedModel:
    """A listed name, or (allow_paths) a checkpoint folder or Hub id, on `device` (None: INFILL_DEVICE)
    in a CPU `precision` (None: INFILL_PRECISION; engine/loading/precision.py)."""
    return load_source(resolve(name_or_path, allow_paths), str(resolve_device(device)), precision)


def default_model(domain: str, kind: str) -> str:
    """The bundled model of a domain and kind: the domain's measured choice where it names one
    (engine.inputs.domains, `drafters`: text drafts with text-ptp1), else `<domain>-<kind>`; or a message
    saying it is not bundled."""
    chosen = dict(DOMAINS[domain].drafters).get(kind) if domain in DOMAINS else None
    name = chosen or f"{domain}-{kind}"
    if name not in listed_folders():
        raise ModelNotFoundError(
            f"No bundled {kind} model for {domain!r} (expected assets/models/{name}); pass model=..."
        )
    return name
