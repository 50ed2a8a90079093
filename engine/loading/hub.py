"""Hugging Face Hub ids wherever a model is named: `NAME@REVISION` (a branch, tag or commit: the
ASSD paper publishes its text and code checkpoints as `therealgabeguo/ASARM@nlp` and `@code`),
the ids an operator lists in INFILL_MODEL_IDS, per-model options (HubOptions: the tokenizer's id,
the ASSD paper's whitespace mapping for code; from defaults, $INFILL_HUB_OPTIONS and
set_hub_options, in that order), whether the Hub can be reached, and the local snapshot of an id.

Its own module because everything about the Hub (the network, its cache, its naming rules and the
one-line messages when it cannot be had) changes together and apart from how a folder is loaded
(engine/loading/loaded_model.py). Hub ids load with `from_pretrained` (downloaded into the Hugging Face
cache when online, read from it offline); offline without a cached copy is one line saying what
to do. A checkpoint without a tokenizer borrows its family's (FAMILY_TOKENIZER: XLNet ->
xlnet/xlnet-base-cased)."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from engine.errors import IncompatibleModelsError, ModelNotFoundError
from engine.loading.folders import KIND_BY_TYPE, listed_folders

# "name" or "org/name", the Hub's own rule for repo ids (no "..", no leading or trailing "." or "-")
HUB_ID = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
# a branch, tag or commit after "@" (branch names may hold "/"; never "..")
REVISION = re.compile(r"^(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$")
# where a checkpoint that ships no tokenizer takes one from (the family's base model, as the paper does)
FAMILY_TOKENIZER = {"xlnet": "xlnet/xlnet-base-cased"}
# (repository name, revision) whose code checkpoints were trained with the ASSD paper's whitespace
# mapping (engine.inputs.tokenization.ASSD_CODE_MAP): on by default for them, any owner (mirrors, forks)
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
    paper's whitespace mapping around the tokenizer (None: on for CODE_MAP_DEFAULT checkpoints);
    exclude_special: no fill takes a special token of the tokenizer (None: on; off, only `<mask>` is
    removed from the distributions, as the ASSD authors' sampler does)."""

    tokenizer: str | None = None
    code_map: bool | None = None
    exclude_special: bool | None = None


_OPTIONS: dict[str, HubOptions] = {}


def set_hub_options(spec: str, tokenizer: str | None = None, code_map: bool | None = None,
                    exclude_special: bool | None = None) -> None:
    """Set a Hub model's options for this process (the CLI's --tokenizer / --code-map /
    --exclude-special); None keeps what the defaults and $INFILL_HUB_OPTIONS say."""
    _OPTIONS[spec] = HubOptions(tokenizer, code_map, exclude_special)


def hub_options(spec: str) -> HubOptions:
    """The options of `NAME[@REV]`: defaults, then $INFILL_HUB_OPTIONS (JSON, e.g.
    '{"org/name@code": {"tokenizer": "xlnet/xlnet-large-cased", "code_map": false,
    "exclude_special": false}}'), then
    set_hub_options; a later source overrides an earlier one only where it says something."""
    name, rev = split_spec(spec)
    tok, cmap, excl = None, (name.rsplit("/", 1)[-1], rev) in CODE_MAP_DEFAULT, True
    raw = os.environ.get("INFILL_HUB_OPTIONS", "").strip()
    layers = []
    if raw:
        try:
            env = json.loads(raw)
        except json.JSONDecodeError as e:
            raise ModelNotFoundError(f"INFILL_HUB_OPTIONS is not JSON ({e}); expected "
                                     '{"org/name@rev": {"tokenizer": "id", "code_map": true}}') from None
        got = env.get(spec, {}) if isinstance(env, dict) else {}
        layers.append(HubOptions(got.get("tokenizer"), got.get("code_map"), got.get("exclude_special"))
                      if isinstance(got, dict) else HubOptions())
    layers.append(_OPTIONS.get(spec, HubOptions()))
    for o in layers:
        tok = o.tokenizer if o.tokenizer is not None else tok
        cmap = o.code_map if o.code_map is not None else cmap
        excl = o.exclude_special if o.exclude_special is not None else excl
    return HubOptions(tok, bool(cmap), bool(excl))


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
    huggingface_hub's retries before saying so; with it that is one short wait."""
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
        f"Available here: {', '.join(sorted(listed_folders())) or 'none'}."
    )


@lru_cache(maxsize=64)
def hub_config(hub_id: str, revision: str | None = None) -> dict:
    """config.json of a Hub id at a revision (from the cache when offline); {} when it cannot be had."""
    try:
        from huggingface_hub import hf_hub_download

        return json.loads(Path(hf_hub_download(hub_id, "config.json", revision=revision,
                                               local_files_only=_hub_local_only())).read_text())
    except Exception:  # noqa: BLE001 - listing never fails; loading says why
        return {}


@lru_cache(maxsize=16)  # successes only: one Hub round trip per id and process
def hub_folder(hub_id: str, revision: str | None = None, weights: bool = True) -> Path:
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
        known = ", ".join(sorted(listed_folders()) + hub_ids()) or "none"
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
    return hub_folder(*split_spec(src), weights=False)
