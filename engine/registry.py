"""Where models come from: bundled checkpoints in assets/models, plus folders an operator lists in
INFILL_MODEL_DIRS (colon-separated; each a checkpoint folder or a folder of them), plus Hugging Face
model ids an operator lists in INFILL_MODEL_IDS (comma-separated, e.g. xlnet/xlnet-base-cased).
Wherever a Hub id is named it may carry a revision, `NAME@REVISION` (a branch, tag or commit: the
ASSD paper publishes its text and code checkpoints as `therealgabeguo/ASARM@nlp` and `@code`).
Visitors of the app choose among these names only; a path or a Hub id is accepted from the Python
API and the CLI (`--model xlnet/xlnet-base-cased`), never from the app.

Hub ids load with `from_pretrained` (downloaded into the Hugging Face cache when online, read from
it offline). Offline without a cached copy is one line saying what to do. A checkpoint without a
tokenizer borrows its family's (FAMILY_TOKENIZER: XLNet -> xlnet/xlnet-base-cased), and per-model
options (HubOptions: the tokenizer's id, the ASSD paper's whitespace mapping for code) come from
defaults, $INFILL_HUB_OPTIONS and set_hub_options, in that order.

A model is loaded onto one device (engine/device.py: INFILL_DEVICE / --device / device=); the
cache key includes it."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import torch

from .checkpoint import check_folder, read_config, where
from .device import resolve_device
from .errors import BadModelError, IncompatibleModelsError, InfillError, ModelNotFoundError
from .tokenization import Codec

ASSETS = Path(__file__).resolve().parent.parent / "assets" / "models"
KIND_BY_TYPE = {"asarm": "asarm", "xlnet": "asarm", "hybrid": "hybrid", "judge": "judge", "ptp": "ptp"}
# "name" or "org/name", the Hub's own rule for repo ids (no "..", no leading or trailing "." or "-")
HUB_ID = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
# a branch, tag or commit after "@" (branch names may hold "/"; never "..")
REVISION = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
# where a checkpoint that ships no tokenizer takes one from (the family's base model, as the paper does)
FAMILY_TOKENIZER = {"xlnet": "xlnet/xlnet-base-cased"}
# (repository name, revision) whose code checkpoints were trained with the ASSD paper's whitespace
# mapping (engine.tokenization.ASSD_CODE_MAP): on by default for them, any owner (mirrors, forks)
CODE_MAP_DEFAULT = {("ASARM", "code")}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "spiece.model", "vocab.txt", "vocab.json")


def split_spec(spec: str) -> tuple[str, str | None]:
    """'org/name@rev' -> ('org/name', 'rev'); without '@' the revision is None (the Hub's main)."""
    name, at, rev = spec.partition("@")
    return name, (rev if at else None)


def is_hub_spec(spec: str) -> bool:
    """A well-formed Hub id, with or without '@REVISION'."""
    name, rev = split_spec(spec)
    return bool(HUB_ID.match(name)) and (rev is None or bool(REVISION.match(rev)))


@dataclass(frozen=True)
class HubOptions:
    """Per-model settings of a Hub checkpoint. tokenizer: a Hub id (NAME@REV allowed) or a folder to
    take the tokenizer from (None: the checkpoint's own, else FAMILY_TOKENIZER); code_map: the ASSD
    paper's whitespace mapping around the tokenizer (None: on for CODE_MAP_DEFAULT checkpoints)."""

    tokenizer: str | None = None
    code_map: bool | None = None


_OPTIONS: dict[str, HubOptions] = {}


def set_hub_options(spec: str, tokenizer: str | None = None, code_map: bool | None = None) -> None:
    """Set a Hub model's options for this process (the CLI's --tokenizer / --code-map); None keeps
    what the defaults and $INFILL_HUB_OPTIONS say."""
    _OPTIONS[spec] = HubOptions(tokenizer, code_map)


def hub_options(spec: str) -> HubOptions:
    """The options of `NAME[@REV]`: defaults, then $INFILL_HUB_OPTIONS (JSON, e.g.
    '{"org/name@code": {"tokenizer": "xlnet/xlnet-large-cased", "code_map": false}}'), then
    set_hub_options; a later source overrides an earlier one only where it says something."""
    name, rev = split_spec(spec)
    tok, cmap = None, (name.rsplit("/", 1)[-1], rev) in CODE_MAP_DEFAULT
    raw = os.environ.get("INFILL_HUB_OPTIONS", "").strip()
    layers = []
    if raw:
        try:
            env = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ModelNotFoundError(f"INFILL_HUB_OPTIONS is not JSON ({e}); expected "
                                     '{"org/name@rev": {"tokenizer": "id", "code_map": true}}') from None
        got = env.get(spec, {}) if isinstance(env, dict) else {}
        layers.append(HubOptions(got.get("tokenizer"), got.get("code_map")) if isinstance(got, dict) else HubOptions())
    layers.append(_OPTIONS.get(spec, HubOptions()))
    for o in layers:
        tok = o.tokenizer if o.tokenizer is not None else tok
        cmap = o.code_map if o.code_map is not None else cmap
    return HubOptions(tok, bool(cmap))
log = logging.getLogger("engine.registry")


@dataclass
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
    code_map: bool = False  # the ASSD paper's whitespace mapping is on (engine.tokenization.ASSD_CODE_MAP)


def _candidates() -> dict[str, Path]:
    """Listed checkpoint folders by name. A folder that fails engine/checkpoint.py's checks is
    skipped with a warning naming it and why: one broken operator folder must not take down the
    others (issue 28: a truncated config.json disabled every model)."""
    roots = [ASSETS] + [Path(p) for p in os.environ.get("INFILL_MODEL_DIRS", "").split(":") if p]
    found: dict[str, Path] = {}
    for root in roots:
        subs = [root] if (root / "config.json").is_file() else (sorted(root.iterdir()) if root.is_dir() else [])
        for sub in subs:
            if (sub / "config.json").is_file() and sub.name not in found and _usable(sub):
                found[sub.name] = sub
    return found


_warned: set[tuple[str, str]] = set()


def _usable(folder: Path) -> bool:
    """Whether a listed folder passes the checkpoint checks; a warning (once per folder and
    reason) names the one that does not."""
    try:
        check_folder(folder, KIND_BY_TYPE)
        return True
    except BadModelError as e:
        key = (str(folder), str(e))
        if key not in _warned:
            _warned.add(key)
            log.warning("skipping model folder %s: %s", folder, e)
        return False


def hub_ids() -> list[str]:
    """The Hub ids the operator lists in INFILL_MODEL_IDS (comma or whitespace separated)."""
    return [i for i in re.split(r"[,\s]+", os.environ.get("INFILL_MODEL_IDS", "")) if i]


def hub_offline() -> bool:
    """HF_HUB_OFFLINE as set now (huggingface_hub reads it once, at import)."""
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE", "").strip().lower()
    return env in ("1", "true", "yes", "on") or bool(constants.HF_HUB_OFFLINE)


HUB_PROBE_SECONDS = 3.0  # one TCP connection to the Hub's endpoint, at most this long
_probe: dict[str, tuple[float, bool]] = {}


def hub_reachable() -> bool:
    """Whether the Hub's endpoint (HF_ENDPOINT) accepts a TCP connection within HUB_PROBE_SECONDS,
    remembered for a minute. Without it an unknown id on a machine with no network spent 23 s in
    huggingface_hub's retries before saying so (issue 28); with it that is one short wait."""
    import socket
    import time
    from urllib.parse import urlsplit

    from huggingface_hub import constants

    url = urlsplit(constants.ENDPOINT)
    host, port = url.hostname or "", url.port or (443 if url.scheme == "https" else 80)
    now = time.monotonic()
    seen = _probe.get(f"{host}:{port}")
    if seen is not None and now - seen[0] < 60:
        return seen[1]
    try:
        with socket.create_connection((host, port), timeout=HUB_PROBE_SECONDS):
            ok = True
    except OSError:
        ok = False
    _probe[f"{host}:{port}"] = (now, ok)
    return ok


def _hub_local_only() -> bool:
    """Read Hub ids from the local cache only: offline by setting, or the Hub does not answer."""
    return hub_offline() or not hub_reachable()


def offline_message(hub_id: str, why: str = "") -> str:
    """One line a person can act on when a Hub id (NAME or NAME@REVISION) cannot be fetched."""
    name, rev = split_spec(hub_id)
    return (
        f"Model {hub_id!r} is not a bundled model or a local checkpoint folder, and the Hugging Face Hub "
        f"cannot be reached to download it ({why or 'offline'}). On a machine with network run "
        f"`hf download {name}{f' --revision {rev}' if rev else ''} --local-dir DIR`, copy DIR here"
        f" and pass --model DIR (the app: list DIR in "
        f"INFILL_MODEL_DIRS){', or unset HF_HUB_OFFLINE if this machine is online' if hub_offline() else ''}. "
        f"Available here: {', '.join(sorted(_candidates())) or 'none'}."
    )


@lru_cache(maxsize=64)
def _hub_config(hub_id: str, revision: str | None = None) -> dict:
    """config.json of a Hub id at a revision (from the cache when offline); {} when it cannot be had."""
    try:
        from huggingface_hub import hf_hub_download

        return json.loads(Path(hf_hub_download(hub_id, "config.json", revision=revision,
                                               local_files_only=_hub_local_only())).read_text())
    except Exception:  # noqa: BLE001 - listing never fails; loading says why
        return {}


def available() -> list[dict]:
    """Name, kind, domain and the model card's metrics of every listed checkpoint (nothing loaded).
    An operator-listed Hub id whose config cannot be had (offline, not cached) has kind "?"."""
    rows = []
    for hid in hub_ids():
        cfg = _hub_config(*split_spec(hid))
        mt = cfg.get("model_type", "?")
        try:
            code = hub_options(hid).code_map
        except ModelNotFoundError:  # a bad INFILL_HUB_OPTIONS: loading says so; listing never fails
            code = False
        rows.append({"name": hid, "path": hid, "kind": KIND_BY_TYPE.get(mt, mt), "model_type": mt,
                     "domain": cfg.get("domain", "code" if code else "text"), "metrics": {}, "hub_id": hid})
    for name, path in _candidates().items():
        cfg = check_folder(path, KIND_BY_TYPE)
        mt = cfg.get("model_type", "?")
        rows.append({
            "name": name,
            "path": str(path),
            "kind": KIND_BY_TYPE.get(mt, mt),
            "model_type": mt,
            "domain": cfg.get("domain", "text"),
            "metrics": _card(path),
        })
    return rows


def resolve(name_or_path: str, allow_paths: bool = True) -> Path | str:
    """A local folder (Path), or a Hugging Face Hub id (str). Listed names come first; with
    allow_paths (the API and the CLI, never the app) also any checkpoint folder or Hub id."""
    cands = _candidates()
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


@lru_cache(maxsize=16)  # successes only: one Hub round trip per id and process
def _hub_folder(hub_id: str, revision: str | None = None, weights: bool = True) -> Path:
    """The local snapshot of a Hub id at a revision: downloaded when online (config, weights,
    tokenizer; not the TF / Flax / Rust copies; no weights for a tokenizer source), the cached one
    when offline; one actionable line when neither."""
    spec = hub_id + (f"@{revision}" if revision else "")
    from huggingface_hub import hf_hub_download, snapshot_download
    from huggingface_hub.errors import GatedRepoError, LocalEntryNotFoundError, OfflineModeIsEnabled, RepositoryNotFoundError

    local = _hub_local_only()
    try:  # the config first: a family the studio cannot run is refused before any weights download
        mt = json.loads(Path(hf_hub_download(hub_id, "config.json", revision=revision,
                                             local_files_only=local)).read_text()).get("model_type", "?")
        if weights and mt not in KIND_BY_TYPE:
            raise IncompatibleModelsError(
                f"{hub_id!r} is a {mt!r} model; the studio runs AS-ARM (its own or XLNet), hybrid and judge "
                "checkpoints."
            )
        folder = Path(snapshot_download(
            hub_id, revision=revision, local_files_only=local,
            allow_patterns=["*.json", "*.model", "*.txt"] + (["*.safetensors", "pytorch_model*.bin"] if weights else []),
        ))
    except (RepositoryNotFoundError, GatedRepoError) as e:
        known = ", ".join(sorted(_candidates()) + hub_ids()) or "none"
        raise ModelNotFoundError(
            f"No model named {spec!r}: not a local folder, and the Hugging Face Hub has no public model by "
            f"that id ({type(e).__name__}). Available here: {known}."
        ) from None
    except (LocalEntryNotFoundError, OfflineModeIsEnabled, OSError) as e:
        why = ("HF_HUB_OFFLINE=1" if hub_offline() else f"no network: {type(e).__name__}" if not local
               else "no network: the Hub's endpoint does not accept connections")
        raise ModelNotFoundError(offline_message(spec, why)) from None
    if not (folder / "config.json").is_file():
        raise ModelNotFoundError(f"The Hugging Face model {spec!r} has no config.json: not a transformers model.")
    return folder


def has_tokenizer(folder: Path) -> bool:
    """Whether a checkpoint folder ships a tokenizer of its own."""
    return any((folder / f).is_file() for f in TOKENIZER_FILES)


def tokenizer_folder(spec: str, folder: Path, model_type: str) -> Path | None:
    """Where a Hub checkpoint's tokenizer comes from: the id its options name, else its own folder,
    else its family's base model (FAMILY_TOKENIZER), fetched like a model (no weights); None: no
    tokenizer anywhere (loading then says so)."""
    src = hub_options(spec).tokenizer
    if src is None and has_tokenizer(folder):
        return None
    src = src or FAMILY_TOKENIZER.get(model_type)
    if src is None:
        raise ModelNotFoundError(f"The Hugging Face model {spec!r} ships no tokenizer and its family "
                                 f"{model_type!r} has no default; name one in INFILL_HUB_OPTIONS or with --tokenizer.")
    if Path(src).is_dir():
        return Path(src).resolve()
    return _hub_folder(*split_spec(src), weights=False)


#: one load at a time per process: transformers' lazily imported modules raced when 8 threads loaded
#: their first hybrid at once ("cannot import name 'AutoConfig'", issue 28), and two threads missing
#: the cache together would both build the model. A cache hit waits only while another load runs.
_LOAD_LOCK = threading.RLock()


def _load(source: Path | str, device: str = "cpu") -> LoadedModel:
    """Cached per (source, device, tokenizer source, code map); a Hub id resolves to its local
    snapshot (and its tokenizer's) first."""
    if isinstance(source, str) and not Path(source).is_dir():
        folder = _hub_folder(*split_spec(source))  # downloads never hold the lock
        mt = read_config(folder).get("model_type", "?")
        args = (folder, device, source, tokenizer_folder(source, folder, mt), hub_options(source).code_map)
    else:
        args = (Path(source), device, None)
    with _LOAD_LOCK:
        return _load_folder(*args)


def warm_imports() -> None:
    """Import what loading a transformers-backed model (hybrid, judge, PTP, XLNet) needs, under the
    load lock: a server calls this before it takes requests, so the first ones do not pay for it."""
    with _LOAD_LOCK:
        from transformers import AutoConfig, AutoModel, AutoTokenizer, PreTrainedTokenizerFast  # noqa: F401

        from .models import register_all

        register_all()


def _card(path: Path) -> dict:
    """metrics.json of a folder ({} when absent or unreadable: a card is never worth a failure)."""
    card = path / "metrics.json"
    try:
        data = json.loads(card.read_text()) if card.is_file() else {}
    except (OSError, ValueError) as e:
        log.warning("model folder %s: metrics.json unreadable (%s); no card shown", path, e)
        return {}
    return data if isinstance(data, dict) else {}


def _cache_clear() -> None:
    _load_folder.cache_clear()


_load.cache_clear = _cache_clear  # type: ignore[attr-defined]  (engine/lab/report/measure.py clears it between retries)


_threads_applied = False


def apply_thread_default() -> None:
    """Torch intra-op threads for sampling, once per process: INFILL_THREADS (default 1; 0 keeps
    torch's own default). On the 2-core shared machine a second thread made calls slower (issue 13,
    README "Speed against cached sequential decoding"): the calls are small and a second thread
    mostly waits for a core."""
    global _threads_applied
    if _threads_applied:
        return
    _threads_applied = True
    n = int(os.environ.get("INFILL_THREADS", "1") or 0)
    if n > 0:
        torch.set_num_threads(n)


def set_threads(n: int) -> None:
    """Torch threads chosen by the caller (bench/report/train --threads): the default no longer applies."""
    global _threads_applied
    _threads_applied = True
    torch.set_num_threads(n)


def _dtype(name) -> torch.dtype:
    """Bundled weights are stored in bfloat16; compute in the dtype the config was built with."""
    return torch.float64 if name in ("float64", torch.float64) else torch.float32


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
    model, info = AutoModel.from_pretrained(str(path), dtype=_dtype(getattr(cfg, "dtype", None)),
                                            output_loading_info=True)
    missing = sorted(info.get("missing_keys") or []) + sorted(str(k) for k in info.get("mismatched_keys") or [])
    if missing:  # transformers would run them on random weights
        raise BadModelError(f"{where(path)}: its weights lack or mismatch {len(missing)} tensors the config needs "
                            f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}).")
    return model


@lru_cache(maxsize=16)
def _load_folder(path: Path, device: str, hub_id: str | None, tok_folder: Path | None = None,
                 code_map: bool = False) -> LoadedModel:
    apply_thread_default()
    cfg_json = check_folder(path, KIND_BY_TYPE)  # BadModelError before anything is allocated
    mt = cfg_json.get("model_type", "?")
    try:
        if mt == "asarm" and (path / "model.safetensors").is_file():  # fast path: no transformers import
            from .models.asarm_core import AsArmLite

            model = AsArmLite.from_folder(path, _dtype(cfg_json.get("dtype", cfg_json.get("torch_dtype"))))
        else:
            model = _load_hf(path)
    except InfillError:
        raise
    except Exception as e:  # noqa: BLE001 - a checkpoint the checks let through still fails in one line
        raise BadModelError(f"{where(path)}: its weights do not load ({_one_line(e)}).") from e
    model.to(device).eval()  # (a device problem is not the checkpoint's: its own error)
    cfg = model.config
    codec = _codec(path, mt, cfg_json, tok_folder, code_map)
    if mt == "xlnet":
        max_tokens = 512
    else:
        max_tokens = cfg.max_positions - 1  # position 0 is BOS
    return LoadedModel(
        name=hub_id or path.name,
        path=Path(hub_id) if hub_id else path,
        kind=KIND_BY_TYPE.get(mt, mt),
        model_type=mt,
        domain=getattr(cfg, "domain", None) or ("code" if code_map else "text"),  # the code mapping: a code model
        model=model,
        codec=codec,
        max_tokens=max_tokens,
        card=_card(path),
        hub_id=hub_id,
        tokenizer_from=str(tok_folder) if tok_folder else None,
        code_map=code_map,
        device=str(device),
    )


def _codec(path: Path, mt: str, cfg: dict, tok_folder: Path | None = None, code_map: bool = False) -> Codec:
    """The folder's tokenizer (or the one a Hub checkpoint borrows, with the code mapping when on),
    checked against the config: same vocabulary size and mask id."""
    try:
        if mt in ("asarm", "hybrid", "judge"):
            codec = Codec.load(path)
        else:  # the PTP head, and a Hub family (XLNet): its own tokenizer class knows its special tokens
            from transformers import AutoTokenizer

            from .tokenization import ASSD_CODE_MAP

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


def load(name_or_path: str, allow_paths: bool = True, device: str | torch.device | None = None) -> LoadedModel:
    """A listed name, or (allow_paths) a checkpoint folder or Hub id, on `device` (None: INFILL_DEVICE)."""
    return _load(resolve(name_or_path, allow_paths), str(resolve_device(device)))


def default_model(domain: str, kind: str) -> str:
    """The bundled `<domain>-<kind>` model's name, or a message saying it is not bundled."""
    name = f"{domain}-{kind}"
    if name not in _candidates():
        raise ModelNotFoundError(
            f"No bundled {kind} model for {domain!r} (expected assets/models/{name}); pass model=..."
        )
    return name
