"""What the loader checks in a model folder before it allocates anything.

A folder an operator lists, or one a Python caller passes, may be half-copied or edited by hand. Read
as it is, a truncated config.json took every model down, a 99-layer config on 4-layer weights ran on
random layers, `max_positions: 1000000000` allocated 12.6 GiB before failing, and the rest surfaced as
raw SafetensorError / RuntimeError / JSONDecodeError. Here, with nothing but config.json and the
safetensors header (a few KB; no tensor is read):

- config.json: valid JSON, an object, a model type the studio runs; sizes whole numbers in bounds
  (`max_positions` at most MAX_POSITIONS); `domain` one the engine knows; `dtype` a float type;
  `mask_token_id` / `bos_token_id` / `pad_token_id` / `special_token_ids` inside the vocabulary;
- model.safetensors: present, its header readable, the file as long as the header says (truncated
  copies are caught), float tensors only; the vocabulary rows, width, layer count and position table
  of the tensors equal to the config's.

Every failure is a BadModelError naming the folder and the reason in one line. The registry skips a
listed folder that fails (with a warning, engine/loading/folders.py) and refuses a passed one; the
tokenizer is checked against the config once it is loaded (engine/loading/loaded_model.py).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from engine.errors import BadModelError
from engine.inputs.domains import CORPORA
from engine.inputs.domains import DOMAINS as REGISTRY

#: positions a config may ask for (every bundled model has 257; the rotary table and the hybrid's
#: position embeddings are allocated at this size)
MAX_POSITIONS = 65_536
#: domains a checkpoint may declare: the registry's and the corpora fine-tuned on (engine/inputs/domains.py)
DOMAINS = (*REGISTRY, *CORPORA)
DTYPES = (None, "float32", "float64", "bfloat16", "float16")
_TENSOR_DTYPES = {"F32", "F64", "BF16", "F16"}
#: whole-number config fields and their bounds
_SIZES = {"vocab_size": (4, 1 << 20), "hidden_size": (1, 1 << 16), "num_layers": (1, 256), "num_heads": (1, 1024),
          "intermediate_size": (1, 1 << 18), "max_positions": (2, MAX_POSITIONS), "causal_layers": (0, 256)}
#: the defaults a config falls back on (the shared ModelConfig's; saved configs carry every field)
_DEFAULTS = {"vocab_size": 260, "hidden_size": 256, "num_layers": 4, "num_heads": 4, "max_positions": 513,
             "mask_token_id": 2, "bos_token_id": 1, "pad_token_id": 0, "domain": "text"}
#: per model type: tensors whose rows are the vocabulary (the first one must exist), the layer
#: stacks and the config field counting each, and the position tables
_VOCAB = {"asarm": ("embed.weight", "head.weight"), "judge": ("embed.weight", "head.weight"),
          "hybrid": ("tok_embed.weight", "nc.embed.weight", "nc.head.weight"), "ptp": ("tok_embed.weight", "out.weight")}
_LAYERS = {"asarm": (("blocks.", "num_layers"),), "judge": (("blocks.", "num_layers"),),
           "hybrid": (("nc.blocks.", "num_layers"), ("causal_blocks.", "causal_layers")), "ptp": (("blocks.", "num_layers"),)}
_POSITIONS = {"hybrid": ("pos_cur.weight", "pos_next.weight")}
_HEADER_MAX = 100 << 20  # a safetensors header longer than this is not one


def where(folder: Path) -> str:
    """How messages name a folder: its name, which is what the model lists show."""
    return f"Model folder {Path(folder).name!r}"


def read_config(folder: Path) -> dict:
    """config.json as a dict, or a BadModelError saying why it cannot be read."""
    p = Path(folder) / "config.json"
    try:
        raw = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise BadModelError(f"{where(folder)}: config.json cannot be read ({_why(e)}).") from None
    try:
        cfg = json.loads(raw)
    except json.JSONDecodeError as e:
        raise BadModelError(f"{where(folder)}: config.json is not valid JSON ({e.msg} at line {e.lineno}, column "
                            f"{e.colno}; {len(raw):,} characters: truncated or edited?).") from None
    if not isinstance(cfg, dict):
        raise BadModelError(f"{where(folder)}: config.json holds a {type(cfg).__name__}, not an object of settings.")
    return cfg


def check_config(folder: Path, cfg: dict, model_types) -> None:
    """The config's own fields (see the module docstring)."""
    w = where(folder)
    mt = cfg.get("model_type")
    if mt not in model_types:
        raise BadModelError(f"{w}: model_type {_short(mt)} is not one the studio runs ({', '.join(sorted(model_types))}).")
    if mt not in _VOCAB:  # a Hub family (XLNet): its own config rules, checked by transformers
        return
    for name, (lo, hi) in _SIZES.items():
        lo = 0 if (mt, name) == ("ptp", "num_layers") else lo  # a PTP head may have no block (docs/DESIGN.md §7.1)
        if name in cfg and not (_is_int(cfg[name]) and lo <= cfg[name] <= hi):
            raise BadModelError(f"{w}: {name} = {_short(cfg[name])} must be a whole number from {lo:,} to {hi:,}.")
    c = {**_DEFAULTS, **cfg}
    if c["hidden_size"] % c["num_heads"]:
        raise BadModelError(f"{w}: hidden_size {c['hidden_size']} is not a multiple of num_heads {c['num_heads']}.")
    vocab = c["vocab_size"]
    for name in ("mask_token_id", "bos_token_id", "pad_token_id"):
        if not (_is_int(c[name]) and 0 <= c[name] < vocab):
            raise BadModelError(f"{w}: {name} = {_short(c[name])} is not a token id of its {vocab}-token vocabulary.")
    special = cfg.get("special_token_ids", [])
    if not isinstance(special, list) or not all(_is_int(i) and 0 <= i < vocab for i in special):
        raise BadModelError(f"{w}: special_token_ids = {_short(special)} must be token ids below {vocab}.")
    if c["domain"] not in DOMAINS:
        raise BadModelError(f"{w}: domain {_short(c['domain'])} is not one the engine knows ({', '.join(DOMAINS)}).")
    for name in ("dtype", "torch_dtype"):
        if cfg.get(name) not in DTYPES:
            raise BadModelError(f"{w}: {name} {_short(cfg.get(name))} is not a float type "
                                f"({', '.join(d for d in DTYPES if d)}).")


def safetensors_header(path: Path) -> dict:
    """The tensors' names, dtypes and shapes from a safetensors file's header, after checking the
    file is as long as the header says (a truncated copy fails here, before any tensor is read)."""
    w = where(path.parent)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            n = int.from_bytes(head, "little") if len(head) == 8 else -1
            if n < 2 or n > min(size - 8, _HEADER_MAX):
                raise BadModelError(f"{w}: {path.name} is truncated or not a safetensors file ({size:,} bytes).")
            header = json.loads(f.read(n))
    except OSError as e:
        raise BadModelError(f"{w}: {path.name} cannot be read ({_why(e)}).") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise BadModelError(f"{w}: {path.name} has an unreadable header (not a safetensors file?).") from None
    if not isinstance(header, dict):
        raise BadModelError(f"{w}: {path.name} has an unreadable header (not a safetensors file?).")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    try:
        end = max((int(v["data_offsets"][1]) for v in tensors.values()), default=0)
        shapes = {k: (v["dtype"], tuple(int(d) for d in v["shape"])) for k, v in tensors.items()}
    except (KeyError, TypeError, ValueError, IndexError):
        raise BadModelError(f"{w}: {path.name} has an unreadable header (not a safetensors file?).") from None
    if 8 + n + end > size:
        raise BadModelError(f"{w}: {path.name} is truncated ({size:,} bytes; its header needs {8 + n + end:,}).")
    return shapes


def check_weights(folder: Path, cfg: dict) -> None:
    """The weights file against the config: present, whole, float, and the same vocabulary, width,
    layer counts and positions (our model types; a Hub family only for presence and truncation)."""
    folder = Path(folder)
    w = where(folder)
    mt = cfg.get("model_type")
    st = folder / "model.safetensors"
    if not st.is_file():
        if mt not in _VOCAB and any(folder.glob("pytorch_model*.bin")):
            return  # a Hub checkpoint in the older format: transformers reads and checks it
        raise BadModelError(f"{w}: no weights (model.safetensors is missing).")
    shapes = safetensors_header(st)
    bad = sorted({dt for dt, _ in shapes.values()} - _TENSOR_DTYPES)
    if bad:
        raise BadModelError(f"{w}: model.safetensors holds {', '.join(bad)} tensors; a model's weights are floats.")
    if mt not in _VOCAB:
        return
    c = {**_DEFAULTS, "causal_layers": 1, **cfg}
    vocab_names = _VOCAB[mt] if not (mt == "hybrid" and cfg.get("backbone_config")) else _VOCAB[mt][:1]
    if vocab_names[0] not in shapes:
        raise BadModelError(f"{w}: model.safetensors has no {vocab_names[0]}: not the weights of a {mt} model.")
    for name in vocab_names:
        if name in shapes and shapes[name][1] != (c["vocab_size"], c["hidden_size"]):
            raise BadModelError(f"{w}: {name} is {_dims(shapes[name][1])} but the config says vocab_size "
                                f"{c['vocab_size']} x hidden_size {c['hidden_size']}.")
    for prefix, field in _LAYERS[mt]:
        if mt == "hybrid" and prefix == "nc.blocks." and cfg.get("backbone_config"):
            continue
        found = {int(m.group(1)) for k in shapes if (m := re.match(re.escape(prefix) + r"(\d+)\.", k))}
        if len(found) != c[field] or (found and max(found) != len(found) - 1):
            raise BadModelError(f"{w}: the config says {field} = {c[field]} but the weights hold {len(found)} "
                                f"({prefix}N) layers.")
    for name in _POSITIONS.get(mt, ()):
        if name in shapes and shapes[name][1][0] != c["max_positions"]:
            raise BadModelError(f"{w}: {name} has {shapes[name][1][0]} positions but the config says max_positions "
                                f"{c['max_positions']}.")


_checked: dict[tuple, dict] = {}


def check_folder(folder: Path, model_types) -> dict:
    """read_config + check_config + check_weights, remembered while neither file changes (listing
    the models runs it on every request; a changed file is checked again)."""
    folder = Path(folder)
    key = (str(folder), _stamp(folder / "config.json"), _stamp(folder / "model.safetensors"))
    if key not in _checked:
        cfg = read_config(folder)
        check_config(folder, cfg, model_types)
        check_weights(folder, cfg)
        if len(_checked) > 256:
            _checked.clear()
        _checked[key] = cfg
    return dict(_checked[key])


def _stamp(p: Path) -> tuple:
    try:
        s = os.stat(p)
        return s.st_mtime_ns, s.st_size, s.st_ino
    except OSError:
        return ()


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _dims(shape: tuple) -> str:
    return " x ".join(str(d) for d in shape) or "a scalar"


def _short(v) -> str:
    r = repr(v)
    return r if len(r) <= 40 else r[:40] + "…"


def _why(e: OSError) -> str:
    return e.strerror or type(e).__name__ if isinstance(e, OSError) else type(e).__name__
