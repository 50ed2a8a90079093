"""A model ready to run (LoadedModel) and how a resolved source becomes one: the network on its
device, its codec checked against the config, its card; cached per (source, device, tokenizer
source, code map, special-token rule), one load at a time.

Its own module because loading is where transformers, the lock and the cache live, and a reader
who wants "which names exist" (engine/loading/registry.py) or "how does a Hub id resolve" (engine/loading/hub.py)
never has to read it. A model is loaded onto one device (engine/loading/device.py: INFILL_DEVICE /
--device / device=); the cache key includes it."""

from __future__ import annotations

import gc
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

from engine.errors import BadModelError, InfillError
from engine.inputs.tokenization import Codec
from engine.loading.checkpoint import check_folder, read_config, where
from engine.loading.folders import KIND_BY_TYPE, read_card
from engine.loading.hub import hub_folder, hub_options, split_spec, tokenizer_folder
from engine.loading.precision import model_precision, resolve_precision
from engine.loading.threads import apply_thread_default


@dataclass(kw_only=True)
class LoadedModel:
    """A model ready to run: the network, its codec and what samplers and the app need to know of
    it (kind, domain, context, metrics)."""

    name: str
    path: Path
    kind: str  # "asarm" (native or XLNet), "hybrid", "judge", "ptp" (a drafter head)
    model_type: str
    domain: str
    model: torch.nn.Module
    codec: Codec
    max_tokens: int  # longest MaskedInput it takes
    card: dict = field(default_factory=dict)
    hub_id: str | None = None  # set when loaded from the Hugging Face Hub (path is then the id)
    device: str = "cpu"
    tokenizer_from: str | None = None  # the folder the tokenizer came from when not the checkpoint's own
    code_map: bool = False  # the ASSD paper's whitespace mapping is on (engine.inputs.tokenization.ASSD_CODE_MAP)
    exclude_special: bool = True  # no fill takes a special token (off: only <mask> is removed, the ASSD authors' rule)
    precision: str = "fp32"  # how its matmuls run on the CPU (engine/loading/precision.py)


#: one load at a time per process: transformers' lazily imported modules raced when 8 threads loaded
#: their first hybrid at once ("cannot import name 'AutoConfig'"), and two threads missing
#: the cache together would both build the model. A cache hit waits only while another load runs.
_LOAD_LOCK = threading.RLock()


def settle_heap() -> None:
    """Move every object the garbage collector tracks now (the model just loaded, torch's and
    transformers' modules, the tokenizer) out of its reach, for good (`gc.freeze`). Why: a full
    collection walks every tracked object, tens of milliseconds with torch and transformers loaded,
    inside whichever model call is running (measured 2026-12-03 in `bench assd` on 8 code windows:
    assd-ptp's calls read 5.03 ms on average against a median of 4.84, and 5.13 against 5.15 frozen;
    docs/DESIGN.md §7.1); frozen, a full collection walks only what runs made since. Reference counting still
    frees a frozen object that nothing holds; only a reference cycle among frozen objects is never
    collected (a model dropped from the load cache with such a cycle stays in memory: a few per process)."""
    gc.freeze()


def load_source(source: Path | str, device: str = "cpu", precision: str | None = None) -> LoadedModel:
    """A resolved source (a folder, or a Hub id: engine.loading.registry.resolve) loaded on `device`
    in a CPU precision (None: the setting's, engine/loading/precision.py). Cached per (source, device,
    precision, tokenizer source, code map); a Hub id resolves to its local snapshot (and its tokenizer's) first."""
    precision = resolve_precision(precision)
    if isinstance(source, str) and not Path(source).is_dir():
        folder = hub_folder(*split_spec(source))  # downloads never hold the lock
        mt = read_config(folder).get("model_type", "?")
        opts = hub_options(source)
        args = (folder, device, precision, source, tokenizer_folder(source, folder, mt), opts.code_map,
                opts.exclude_special)
    else:
        args = (Path(source), device, precision, None)
    with _LOAD_LOCK:
        return _load_folder(*args)


def warm_imports() -> None:
    """Import what loading a transformers-backed model (hybrid, judge, PTP, XLNet) needs, under the
    load lock: a server calls this before it takes requests, so the first ones do not pay for it."""
    with _LOAD_LOCK:
        from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedTokenizerFast  # noqa: F401

        from engine.models import register_all

        register_all()


def clear_model_cache() -> None:
    """Forget every loaded model (lab/report/measure.py, between retries of a checkpoint a
    training job may be rewriting)."""
    _load_folder.cache_clear()


def _dtype(name) -> torch.dtype:
    """Bundled weights are stored in bfloat16; compute in the dtype the config was built with."""
    return torch.float64 if name in ("float64", torch.float64) else torch.float32


def _load_hf(path: Path):
    """Any checkpoint through transformers' Auto classes (imports transformers: seconds)."""
    from transformers import AutoConfig, AutoModel
    from transformers.utils import logging as hf_logging

    from engine.models import register_all

    register_all()  # our model types with the Auto classes
    hf_logging.disable_progress_bar()  # a "Loading weights" bar per model load would drown the CLI's output
    cfg = AutoConfig.from_pretrained(str(path))
    if cfg.model_type == "xlnet":
        from transformers import XLNetLMHeadModel

        return XLNetLMHeadModel.from_pretrained(str(path))
    model, info = AutoModel.from_pretrained(str(path), dtype=_dtype(getattr(cfg, "dtype", None)),
                                            output_loading_info=True)
    missing = sorted(info.get("missing_keys") or []) + sorted(str(k) for k in info.get("mismatched_keys") or [])
    if missing:  # transformers would run them on random weights
        raise BadModelError(f"{where(path)}: its weights lack or mismatch {len(missing)} tensors the config needs "
                            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}).")
    return model


@lru_cache(maxsize=16)
def _load_folder(path: Path, device: str, precision: str, hub_id: str | None, tok_folder: Path | None = None,
                 code_map: bool = False, exclude_special: bool = True) -> LoadedModel:
    apply_thread_default()
    cfg_json = check_folder(path, KIND_BY_TYPE)  # BadModelError before anything is allocated
    mt = cfg_json.get("model_type", "?")
    try:
        if mt == "asarm" and (path / "model.safetensors").is_file():  # fast path: no transformers import
            from engine.models.asarm_core import AsArmLite

            model = AsArmLite.from_folder(path, _dtype(cfg_json.get("dtype", cfg_json.get("torch_dtype"))))
        else:
            model = _load_hf(path)
    except InfillError:
        raise
    except Exception as e:  # noqa: BLE001 - a checkpoint the checks let through still fails in one line
        raise BadModelError(f"{where(path)}: its weights do not load ({_one_line(e)}).") from e
    model.to(device).eval()  # (a device problem is not the checkpoint's: its own error)
    precision = model_precision(model, device, precision)
    if precision != "fp32":  # (a fresh model computes in fp32; model_precision says it can do more)
        model.set_cpu_precision(precision)
    cfg = model.config
    codec = _codec(path, mt, cfg_json, tok_folder, code_map)
    if mt == "xlnet":
        max_tokens = 512
    else:
        max_tokens = cfg.max_positions - 1  # position 0 is BOS
    settle_heap()
    return LoadedModel(
        name=hub_id or path.name,
        path=Path(hub_id) if hub_id else path,
        kind=KIND_BY_TYPE.get(mt, mt),
        model_type=mt,
        domain=getattr(cfg, "domain", None) or ("code" if code_map else "text"),  # the code mapping: a code model
        model=model,
        codec=codec,
        max_tokens=max_tokens,
        card=read_card(path),
        hub_id=hub_id,
        tokenizer_from=str(tok_folder) if tok_folder else None,
        code_map=code_map,
        exclude_special=exclude_special,
        device=str(device),
        precision=precision,
    )


def _codec(path: Path, mt: str, cfg: dict, tok_folder: Path | None = None, code_map: bool = False) -> Codec:
    """The folder's tokenizer (or the one a Hub checkpoint borrows, with the code mapping when on),
    checked against the config: same vocabulary size and mask id."""
    try:
        if mt in ("asarm", "hybrid", "judge"):
            codec = Codec.load(path)
        else:  # the PTP head, and a Hub family (XLNet): its own tokenizer class knows its special tokens
            from transformers import AutoTokenizer

            from engine.inputs.tokenization import ASSD_CODE_MAP

            codec = Codec(AutoTokenizer.from_pretrained(str(tok_folder or path)),
                          whitespace=ASSD_CODE_MAP if code_map else None)
    except Exception as e:  # noqa: BLE001
        raise BadModelError(f"{where(path)}: its tokenizer does not load ({_one_line(e)}).") from e
    if mt in ("asarm", "hybrid", "judge", "ptp"):
        if codec.vocab_size != cfg.get("vocab_size", codec.vocab_size):
            raise BadModelError(f"{where(path)}: its tokenizer has {codec.vocab_size} tokens but the config says "
                                f"vocab_size {cfg['vocab_size']}.")
        if codec.mask_id != cfg.get("mask_token_id", codec.mask_id):
            raise BadModelError(f"{where(path)}: its tokenizer's mask id is {codec.mask_id} but the config says "
                                f"mask_token_id {cfg['mask_token_id']}.")
    return codec


def _one_line(e: BaseException) -> str:
    """An exception as one short line: its type and the first line of its message."""
    msg = (str(e).strip().splitlines() or [""])[0]
    return f"{type(e).__name__}: {msg[:160]}" if msg else type(e).__name__
