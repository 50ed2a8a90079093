"""Measuring for the report: which models exist (hashed as they load), and every sampler run on
the same inputs and seeds, interleaved, optionally shared among worker processes (--workers on one
machine; or the processes of a torchrun / accelerate launch, lab.shard).

Samplers run interleaved on the same inputs and seeds so that drift in machine load hits all of
them alike; a model that is missing or cannot be loaded is skipped with a note, never fatal.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.loading.threads import set_threads
from engine.trace import tested_decisions, untested_accepts

from .. import progress, shard
from ..data import sha256_file
from .plan import ERROR_MARK, SPECULATIVE


@dataclass(kw_only=True)
class ModelInfo:
    """A loaded model with what the report says about it: folder, weight hash, training state."""

    name: str
    kind: str
    domain: str
    path: Path
    sha256: str
    max_tokens: int
    lm: object = field(repr=False)
    train_state: dict = field(default_factory=dict)

    @property
    def ref(self) -> str:
        """What InfillRun and load take: the folder, so --models-dir wins over a bundled model of the
        same name."""
        return str(self.path)


class Models:
    """Finds `<domain>-<kind>` folders, loads them once and hashes their weights at load time."""

    def __init__(self, models_dir: Path | None):
        self.models_dir = models_dir
        self.used: dict[str, ModelInfo] = {}
        self.missing: dict[str, str] = {}

    def _path(self, name: str) -> Path | None:
        if self.models_dir is not None:
            p = self.models_dir / name
            return p if (p / "config.json").is_file() else None
        from engine.loading.registry import available

        rows = {r["name"]: Path(r["path"]) for r in available()}
        return rows.get(name)

    def get(self, domain: str, kind: str) -> ModelInfo | None:
        """The `<domain>-<kind>` model, loaded once; None (with the reason in `missing`) if absent."""
        name = f"{domain}-{kind}"
        if name in self.used:
            return self.used[name]
        if name in self.missing:
            return None
        path = self._path(name)
        where = str(self.models_dir) if self.models_dir else "assets/models or INFILL_MODEL_DIRS"
        if path is None:
            self.missing[name] = f"no model folder named {name} in {where}"
            return None
        err = self._load(name, path)
        if name in self.used:
            return self.used[name]
        self.missing[name] = f"could not load {path}: {err}"
        return None

    def _load(self, name: str, path: Path) -> str:
        """Load into `used`, retrying while a training job rewrites the checkpoint; else the error."""
        from engine.loading import registry
        from engine.loading.loaded_model import clear_model_cache

        err = ""
        for attempt in range(3):  # a training job may be rewriting the checkpoint right now
            try:
                weights = path / "model.safetensors"
                before = sha256_file(weights) if weights.is_file() else ""
                lm = registry.load(str(path))
                after = sha256_file(weights) if weights.is_file() else ""
                if before == after:
                    state = path / "train_state.json"
                    self.used[name] = ModelInfo(name=name, kind=lm.kind, domain=lm.domain, path=path,
                                                sha256=after or "n/a (no model.safetensors)", max_tokens=lm.max_tokens, lm=lm,
                                                train_state=json.loads(state.read_text()) if state.is_file() else {})
                    return ""
                err = "checkpoint changed while loading"
            except Exception as e:  # noqa: BLE001 - skip with a note, never crash
                err = f"{type(e).__name__}: {e}"
            clear_model_cache()
            time.sleep(2 * (attempt + 1))
        return err


@dataclass(kw_only=True)
class Record:
    """One sampler's run on one input: cost, output and the acceptance events of its trace."""

    sampler: str
    index: int
    calls: float
    rounds: int
    masked: int
    seconds: float
    text: str
    generated: list[int]
    events: list[tuple[int, bool, float]]  # (position in round, accepted, min(1, q/p)) of tested drafts
    untested: int  # drafts accepted without a test (exact rows)
    judge_nll: float = float("nan")


def acceptance_events(trace) -> tuple[list[tuple[int, bool, float]], int]:
    """Tested drafts of a speculative trace with their position in the round and min(1, q/p), and
    the number of drafts kept untested; engine.trace.tested_decisions decides what counts, for the
    report, the store's statistics and the app alike."""
    events = [(i, acc, 1.0 if p <= 0 else min(1.0, q / p))
              for i, acc, p, q in tested_decisions(trace) if p is not None and q is not None]
    return events, untested_accepts(trace)


def run_one(mi, model: ModelInfo | str, sampler: str, seed: int, k: int, draft: ModelInfo | str | None = None,
            **kw) -> Record:
    """Run one sampler to the end on one masked input and keep what the report reads."""
    from engine.api import InfillRun

    ref = model if isinstance(model, str) else model.ref
    draft_ref = draft if draft is None or isinstance(draft, str) else draft.ref
    run = InfillRun(masked_input=mi, model=ref, sampler=sampler, seed=seed, k=k, draft_model=draft_ref, **kw)
    for _ in run.stream():
        pass
    res = run.result(with_log_prob=False)
    events, untested = acceptance_events(res.trace) if sampler in SPECULATIVE else ([], 0)
    return Record(
        sampler=sampler,
        index=seed,
        calls=float(res.calls),
        rounds=int(res.rounds),
        masked=int(res.masked_tokens),
        seconds=float(res.seconds),
        text=res.text,
        generated=[res.tokens[p] for p in mi.masked],
        events=events,
        untested=untested,
    )


@dataclass(kw_only=True)
class Arm:
    """One sampler to measure: its label, the model it runs on and its keyword arguments."""

    label: str
    sampler: str
    model: ModelInfo
    kwargs: dict = field(default_factory=dict)
    draft: ModelInfo | None = None

    def job(self) -> tuple:
        """What a worker process needs to run this arm (folders, not loaded models)."""
        return (self.label, self.sampler, self.model.name, self.model.ref,
                self.draft.ref if self.draft is not None else None, self.kwargs)


def sampler_arms(models: Models, domain: str, asarm: ModelInfo, samplers: list[str], notes: list[str]) -> list[Arm]:
    """An arm per AS-ARM sampler; one that needs a second network (DRAFTER_KIND) gets the domain's
    drafter, or is skipped with a note when there is none."""
    from engine.samplers import DRAFTER_KIND

    arms = []
    for s in samplers:
        kind = DRAFTER_KIND.get(s)
        draft = models.get(domain, kind) if kind else None
        if kind and draft is None:
            notes.append(f"{s} skipped: no drafter ({models.missing.get(f'{domain}-{kind}')}).")
            continue
        arms.append(Arm(label=s, sampler=s, model=asarm, draft=draft))
    return arms


WORKERS = 1  # processes that measure inputs in parallel (--workers); each runs one torch thread
_warmed: set[tuple[str, str]] = set()  # (arm, model folder) this process has already run once


def _measure_input(i: int, inputs: dict[str, object], jobs: list[tuple], seed: int, k: int,
                   warmup: bool) -> list[tuple[str, Record | str]]:
    """Every arm on input i (one worker's share of `measure`): (label, record or error message)."""
    out: list[tuple[str, Record | str]] = []
    for label, sampler, model_name, ref, draft_ref, kw in jobs:
        mi = inputs[model_name]
        try:
            if warmup and (label, ref) not in _warmed:  # first-call costs stay out of the timed run
                run_one(mi, ref, sampler, seed + i, k, draft_ref, **kw)
            _warmed.add((label, ref))
            out.append((label, run_one(mi, ref, sampler, seed + i, k, draft_ref, **kw)))
        except Exception as e:  # noqa: BLE001 - reported as a note, the other arms go on
            out.append((label, f"{type(e).__name__}: {e}"))
    return out


def _worker_init() -> None:
    set_threads(1)


def measure(inputs_by_model: dict[str, list], arms: list[Arm], seed: int, k: int, notes: list[str],
            warmup: bool = True) -> dict[str, list[Record]]:
    """Every arm on every input, interleaved; input i uses seed + i for every arm. An arm that
    raises is dropped with a note (the others go on). With WORKERS > 1 the inputs are shared
    among processes; every arm of one input still runs in the same process, one after another,
    so per-input wall ratios compare runs made under the same load."""
    n = max((len(v) for v in inputs_by_model.values()), default=0)
    work = []
    for i in range(n):
        row = {name: v[i] for name, v in inputs_by_model.items() if i < len(v)}
        work.append((i, row, [a.job() for a in arms if a.model.name in row], seed, k, warmup))
    desc = f"report: {len(arms)} samplers per input"
    if WORKERS > 1 and n > 1 and not shard.distributed():
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(WORKERS, mp_context=mp.get_context("spawn"), initializer=_worker_init) as ex:
            results = list(progress.bar(ex.map(_measure_input, *zip(*work, strict=True)), total=n, desc=desc))
    else:  # one process, or this process's share of a torchrun / accelerate launch
        results = shard.shard_map(lambda _i, w: _measure_input(*w), work, desc=desc)
    out: dict[str, list[Record]] = {a.label: [] for a in arms}
    for i, res in enumerate(results):
        for label, rec in res:
            if label not in out:
                continue  # failed on an earlier input
            if isinstance(rec, str):
                notes.append(f"{ERROR_MARK}: {label} failed on input {i} ({rec}); left out.")
                out.pop(label)
            else:
                out[label].append(rec)
    return out


def windows(model: ModelInfo, length: int, rate: float, n: int, seed: int) -> list:
    """n masked test windows for `model` (its codec, its context limit), seeded."""
    from ..workloads import masked_windows

    return masked_windows(model.domain, model.lm.codec, length, rate, n, seed=seed, max_tokens=model.max_tokens)
