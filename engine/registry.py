"""Where models come from: bundled checkpoints in assets/models, plus folders an operator lists in
INFILL_MODEL_DIRS (colon-separated; each a checkpoint folder or a folder of them). Visitors of the
app choose among these names only; a path is accepted from the Python API and the CLI."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

from .errors import ModelNotFoundError
from .tokenization import Codec

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "models"
KIND_BY_TYPE = {"asarm": "asarm", "xlnet": "asarm", "hybrid": "hybrid", "judge": "judge"}


@dataclass
class LoadedModel:
    name: str
    path: Path
    kind: str  # "asarm" (native or XLNet), "hybrid", "judge"
    model_type: str
    domain: str
    model: torch.nn.Module
    codec: Codec
    max_tokens: int  # longest MaskedInput it takes
    card: dict = field(default_factory=dict)


def _candidates() -> dict[str, Path]:
    roots = [ASSETS] + [Path(p) for p in os.environ.get("INFILL_MODEL_DIRS", "").split(":") if p]
    found: dict[str, Path] = {}
    for root in roots:
        if (root / "config.json").is_file():
            found.setdefault(root.name, root)
        elif root.is_dir():
            for sub in sorted(root.iterdir()):
                if (sub / "config.json").is_file():
                    found.setdefault(sub.name, sub)
    return found


def available() -> list[dict]:
    """Name, kind, domain and the model card's metrics of every listed checkpoint (nothing loaded)."""
    rows = []
    for name, path in _candidates().items():
        cfg = json.loads((path / "config.json").read_text())
        mt = cfg.get("model_type", "?")
        metrics = path / "metrics.json"
        rows.append({
            "name": name,
            "path": str(path),
            "kind": KIND_BY_TYPE.get(mt, mt),
            "model_type": mt,
            "domain": cfg.get("domain", "text"),
            "metrics": json.loads(metrics.read_text()) if metrics.is_file() else {},
        })
    return rows


def resolve(name_or_path: str, allow_paths: bool = True) -> Path:
    cands = _candidates()
    if name_or_path in cands:
        return cands[name_or_path]
    p = Path(name_or_path)
    if allow_paths and (p / "config.json").is_file():
        return p.resolve()
    known = ", ".join(sorted(cands)) or "none"
    raise ModelNotFoundError(f"No model named {name_or_path!r}. Available: {known}.")


_threads_applied = False


def apply_thread_default() -> None:
    """Torch intra-op threads for sampling, once per process: INFILL_THREADS (default 1; 0 keeps
    torch's own default). One thread measured faster than two on the 2-core shared machine, for
    every sampler (issue 13, docs/RESULTS.md): the calls are small and a second thread mostly waits."""
    global _threads_applied
    if _threads_applied:
        return
    _threads_applied = True
    n = int(os.environ.get("INFILL_THREADS", "1") or 0)
    if n > 0:
        torch.set_num_threads(n)


def set_threads(n: int) -> None:
    """Torch threads chosen by the caller (bench/report --threads): the default no longer applies."""
    global _threads_applied
    _threads_applied = True
    torch.set_num_threads(n)


def _load_hf(path: Path):
    """Any checkpoint through transformers' Auto classes (imports transformers: seconds)."""
    from transformers import AutoConfig, AutoModel
    from transformers.utils import logging as hf_logging

    from .models import register_all

    register_all()  # our model types with the Auto classes
    hf_logging.disable_progress_bar()  # a "Loading weights" bar per model load would drown the CLI's output
    cfg = AutoConfig.from_pretrained(str(path))
    if cfg.model_type == "xlnet":
        from transformers import XLNetLMHeadModel

        return XLNetLMHeadModel.from_pretrained(str(path))
    return AutoModel.from_pretrained(str(path), dtype=_dtype(getattr(cfg, "dtype", None)))


def _dtype(name) -> torch.dtype:
    """Bundled weights are stored in bfloat16; compute in the dtype the config was built with."""
    return torch.float64 if name in ("float64", torch.float64) else torch.float32


@lru_cache(maxsize=16)
def _load(path: Path) -> LoadedModel:
    apply_thread_default()
    cfg_json = json.loads((path / "config.json").read_text())
    mt = cfg_json.get("model_type", "?")
    if mt == "asarm" and (path / "model.safetensors").is_file():  # fast path: no transformers import
        from .models.asarm_core import AsArmLite

        model = AsArmLite.from_folder(path, _dtype(cfg_json.get("dtype", cfg_json.get("torch_dtype"))))
    else:
        model = _load_hf(path)
    model.eval()
    cfg = model.config
    codec = Codec.load(path)
    if mt == "xlnet":
        max_tokens = 512
    else:
        max_tokens = cfg.max_positions - 1  # position 0 is BOS
    card = path / "metrics.json"
    return LoadedModel(
        name=path.name,
        path=path,
        kind=KIND_BY_TYPE.get(mt, mt),
        model_type=mt,
        domain=getattr(cfg, "domain", "text"),
        model=model,
        codec=codec,
        max_tokens=max_tokens,
        card=json.loads(card.read_text()) if card.is_file() else {},
    )


def load(name_or_path: str, allow_paths: bool = True) -> LoadedModel:
    return _load(resolve(name_or_path, allow_paths))


def default_model(domain: str, kind: str) -> str:
    name = f"{domain}-{kind}"
    if name not in _candidates():
        raise ModelNotFoundError(
            f"No bundled {kind} model for {domain!r} (expected assets/models/{name}); pass model=..."
        )
    return name
