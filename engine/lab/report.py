"""`python -m engine report [--quick]`: the results report, docs/RESULTS.md plus PNG figures.

Sections (issue 7): exact samplers against sequential decoding, acceptance explained, the
self-speculative sampler against MDM, HumanEval single-line infilling, scaling with length and
masking rate, provenance. Every sentence with a number in it is written from measured values.

Samplers run interleaved on the same inputs and seeds (so drift in machine load hits all of them
alike) and wall-clock ratios are only taken within one run. A model that is missing or cannot be
loaded is skipped with a visible note; a section that fails is reported as failed, never fatal.
Figures are exported as PNG through plotly + kaleido (which drives the system Chromium); when the
static export fails the figure is written as self-contained HTML and the report says so.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import shlex
import statistics
import subprocess
import sys
import time
import traceback
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import torch

from ..device import device_name
from ..registry import set_threads
from ..trace import tested_decisions, untested_accepts
from .bench import mean_se
from .data import sha256_file

DOMAINS = ("text", "code", "protein")
EXACT = ["sequential", "sequential-cache", "assd", "assd-cache", "assd-pipelined", "assd-ngram", "assd-diffusion",
         "assd-ptp"]
BASELINES = ("sequential", "sequential-cache")  # always measured: uncached reference, strongest baseline
SPECULATIVE = [s for s in EXACT if s not in BASELINES]
ALPHA = 0.01  # significance level of the exactness checks
ERROR_MARK = "**error**"  # prefix of notes about a failed section (the test looks for it)
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf"]


# ------------------------------------------------------------------------------------------ plan


@dataclass
class Plan:
    quick: bool
    samples: int
    length: int
    k: int
    seed: int
    scaling_lengths: tuple[int, ...]
    scaling_rates: tuple[float, ...]
    scaling_length: int
    scaling_samples: int
    ss_samples: int
    ss_length: int
    mdm_steps: list[int]
    self_spec: list[tuple[float, int]]
    scaling_mdm_steps: int
    scaling_dtau: float
    humaneval_limit: int | None
    mask_rate_main: float = 0.95
    samplers: list[str] = field(default_factory=lambda: list(EXACT))


def make_plan(a: argparse.Namespace) -> Plan:
    from .bench_selfspec import MDM_STEPS, SELF_SPEC

    if a.quick:
        n = a.samples or 2
        plan = Plan(True, n, 32, a.k, a.seed, (16, 32, 64, 512), (0.25, 0.5, 0.95), 32, 2, 2, 32,
                    [4, 8, 16], [(0.2, 1), (0.1, 1), (0.1, 2)], 8, 0.1, 3)
    else:
        n = a.samples or 100
        plan = Plan(False, n, 256, a.k, a.seed, (64, 128, 256, 512), (0.25, 0.5, 0.95), 256,
                    max(2, n // 10), max(2, n // 4), 256, list(MDM_STEPS), list(SELF_SPEC), 32, 0.05, 100)
    if a.samples and not a.quick:
        plan.scaling_samples, plan.ss_samples = max(2, n // 10), max(2, n // 4)
    if a.samplers:
        chosen = [s.strip() for s in a.samplers.split(",") if s.strip()]
        plan.samplers = list(BASELINES) + [s for s in EXACT if s in chosen and s not in BASELINES]
    if getattr(a, "scaling_samples", None):
        plan.scaling_samples = a.scaling_samples
    if getattr(a, "ss_samples", None):
        plan.ss_samples = a.ss_samples
    if a.humaneval_limit is not None:
        plan.humaneval_limit = a.humaneval_limit or None  # 0: every task
    return plan


# ------------------------------------------------------------------------------------ formatting


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def fmt(x, nd: int = 2) -> str:
    return f"{x:.{nd}f}" if _finite(x) else "n/a"


def fmt_se(m, se, nd: int = 2) -> str:
    if not _finite(m):
        return "n/a"
    return f"{m:.{nd}f} ± {se:.{nd}f}" if _finite(se) else f"{m:.{nd}f} ± n/a"


def fmt_p(p) -> str:
    if not _finite(p):
        return "n/a"
    return f"{p:.2e}" if p < 1e-3 else f"{p:.3f}"


def md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return out + [""]


def log(msg: str) -> None:
    print(f"[report {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------- models


@dataclass
class ModelInfo:
    name: str
    kind: str
    domain: str
    path: Path
    sha256: str
    max_tokens: int
    lm: object = field(repr=False)
    train_state: dict = field(default_factory=dict)

    @property
    def ref(self) -> str:  # what InfillRun / load take: the folder, so --models-dir wins over bundled
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
        from ..registry import available

        rows = {r["name"]: Path(r["path"]) for r in available()}
        return rows.get(name)

    def get(self, domain: str, kind: str) -> ModelInfo | None:
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
        from .. import registry

        err = ""
        for attempt in range(3):  # a training job may be rewriting the checkpoint right now
            try:
                weights = path / "model.safetensors"
                before = sha256_file(weights) if weights.is_file() else ""
                lm = registry.load(str(path))
                after = sha256_file(weights) if weights.is_file() else ""
                if before == after:
                    state = path / "train_state.json"
                    info = ModelInfo(name, lm.kind, lm.domain, path, after or "n/a (no model.safetensors)",
                                     lm.max_tokens, lm,
                                     json.loads(state.read_text()) if state.is_file() else {})
                    self.used[name] = info
                    return info
                err = "checkpoint changed while loading"
            except Exception as e:  # noqa: BLE001 - skip with a note, never crash
                err = f"{type(e).__name__}: {e}"
            registry._load.cache_clear()
            time.sleep(2 * (attempt + 1))
        self.missing[name] = f"could not load {path}: {err}"
        return None

    def caption(self, *infos: ModelInfo | None, seeds: str) -> str:
        ms = ", ".join(f"{m.name} (sha256 {m.sha256[:12]})" for m in infos if m is not None)
        return f"_Models: {ms}; {seeds}; machine: {MACHINE_SHORT}; date {DATE}._"


MACHINE_SHORT = ""
DATE = ""


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


# ------------------------------------------------------------------------------------ measuring


@dataclass
class Record:
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
    from ..api import InfillRun

    ref = model if isinstance(model, str) else model.ref
    draft_ref = draft if draft is None or isinstance(draft, str) else draft.ref
    run = InfillRun(masked_input=mi, model=ref, sampler=sampler, seed=seed, k=k, draft_model=draft_ref, **kw)
    for _ in run.stream():
        pass
    res = run.result(with_log_prob=False)
    events, untested = acceptance_events(res.trace) if sampler in SPECULATIVE else ([], 0)
    return Record(sampler, seed, float(res.calls), int(res.rounds), int(res.masked_tokens), float(res.seconds),
                  res.text, [res.tokens[p] for p in mi.masked], events, untested)


@dataclass
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


def _logged(results, n: int) -> list:
    """Collect results in order, logging progress every 10 inputs."""
    out = []
    for r in results:
        out.append(r)
        if n >= 20 and len(out) % 10 == 0:
            log(f"  {len(out)}/{n} inputs measured")
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
    if WORKERS > 1 and n > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(WORKERS, mp_context=mp.get_context("spawn"), initializer=_worker_init) as ex:
            results = _logged(ex.map(_measure_input, *zip(*work, strict=True)), n)
    else:
        results = _logged((_measure_input(*w) for w in work), n)
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
    from .workloads import masked_windows

    return masked_windows(model.domain, model.lm.codec, length, rate, n, seed=seed, max_tokens=model.max_tokens)


def welch(a: list[float], b: list[float]) -> float:
    from scipy.stats import ttest_ind

    a = [x for x in a if _finite(x)]
    b = [x for x in b if _finite(x)]
    if len(a) < 2 or len(b) < 2:
        return float("nan")
    if statistics.pvariance(a) == 0 and statistics.pvariance(b) == 0:
        return 1.0 if statistics.fmean(a) == statistics.fmean(b) else 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(ttest_ind(a, b, equal_var=False).pvalue)


def loglog_slope(xs: list[float], ys: list[float]) -> float:
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if _finite(x) and _finite(y) and x > 0 and y > 0]
    if len(pts) < 2 or len({p[0] for p in pts}) < 2:
        return float("nan")
    mx = statistics.fmean(p[0] for p in pts)
    my = statistics.fmean(p[1] for p in pts)
    sxx = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / sxx


def growth_words(b: float) -> str:
    if not _finite(b):
        return "not fitted"
    if abs(b) < 0.15:
        return f"flat (slope {b:.2f})"
    if 0.85 <= b <= 1.15:
        return f"linear (slope {b:.2f})"
    return f"~n^{b:.2f}" + (" (sublinear)" if b < 0.85 else " (superlinear)")


# ----------------------------------------------------------------------------------------- report


class Report:
    def __init__(self, plan: Plan, models: Models, domains: list[str], fig_dir: Path, rel_fig: str):
        self.plan, self.models, self.domains = plan, models, domains
        self.fig_dir, self.rel_fig = fig_dir, rel_fig
        self.figures: dict[str, object] = {}
        self.headlines: list[str] = []
        self.section_seconds: dict[str, float] = {}
        self.data_missing: dict[str, str] = {}

    # -- helpers
    def figure(self, name: str, fig) -> str:
        self.figures[name] = fig
        return f"{{{{FIG:{name}}}}}"

    def domain_ready(self, domain: str) -> str | None:
        """None when the domain's test split exists, else why not."""
        if domain in self.data_missing:
            return self.data_missing[domain]
        from .data import load_split

        try:
            load_split(domain, "test")
        except Exception as e:  # noqa: BLE001
            self.data_missing[domain] = f"{type(e).__name__}: {e}"
            return self.data_missing[domain]
        return None

    def missing_note(self, domain: str, kind: str) -> str:
        name = f"{domain}-{kind}"
        return f"_Skipped {name}: {self.models.missing.get(name, 'not available')}._"

    # -- 1. exact samplers
    def section_exact(self) -> list[str]:
        p = self.plan
        out = ["## 1. Exact samplers against sequential decoding", "",
               f"{int(p.mask_rate_main * 100)}%-masked windows of the test split ({p.length} tokens, proteins: whole "
               f"sequences up to {p.length}), {p.samples} inputs per domain, k = {p.k}. Every sampler runs on every "
               "input with the same seed, interleaved. Judge NLL: mean per-token NLL of the whole completed window "
               "under the domain's left-to-right judge; entropy: unigram entropy (bits) of the generated tokens; "
               "wall ratio: baseline seconds / sampler seconds on the same input, against cached sequential decoding "
               "(sequential-cache, the strongest baseline) and, labelled as such, uncached sequential. Cells are "
               "mean ± standard "
               f"error over inputs; p-values are Welch two-sample t-tests against sequential, flagged when "
               f"p < {ALPHA}.", ""]
        self.exact_records: dict[str, dict[str, list[Record]]] = {}
        for domain in self.domains:
            out += [f"### {domain}", ""]
            why = self.domain_ready(domain)
            asarm = self.models.get(domain, "asarm")
            if why or asarm is None:
                out += [f"_Skipped: {why}_" if why else self.missing_note(domain, "asarm"), ""]
                continue
            hybrid = self.models.get(domain, "hybrid")
            judge = self.models.get(domain, "judge")
            notes: list[str] = []
            length = min(p.length, asarm.max_tokens)
            if length < p.length:
                notes.append(f"{asarm.name} takes at most {asarm.max_tokens} tokens: windows cut to {length}.")
            arms = self.sampler_arms(domain, asarm, p.samplers, notes)
            inputs = windows(asarm, length, 0.95, p.samples, p.seed)
            if len(inputs) < p.samples:
                notes.append(f"the test split gave {len(inputs)} inputs, not {p.samples}.")
            log(f"exact samplers: {domain}, {len(inputs)} inputs of {length} tokens, {len(arms)} samplers")
            recs = measure({asarm.name: inputs}, arms, p.seed, p.k, notes)
            self.exact_records[domain] = recs
            if judge is not None:
                from .metrics import judge_nll

                for rs in recs.values():
                    for r in rs:
                        r.judge_nll = judge_nll([r.text], judge.ref)
            else:
                notes.append(f"judge NLL not measured: {self.models.missing.get(domain + '-judge')}.")
            out += self._exact_table(domain, recs, judge is not None)
            out += [f"- {n}" for n in notes] + ([""] if notes else [])
            out += [self.models.caption(asarm, hybrid, judge,
                                        seeds=f"inputs seed {p.seed}, input i runs with seed {p.seed}+i"), ""]
        return out

    def _exact_table(self, domain: str, recs: dict[str, list[Record]], have_judge: bool) -> list[str]:
        seq = recs.get("sequential", [])
        seq_secs = {r.index: r.seconds for r in seq}
        cached_secs = {r.index: r.seconds for r in recs.get("sequential-cache", [])}
        headers = ["sampler", "inputs", "judge NLL", "entropy (bits)", "calls", "tokens/round", "tokens/call",
                   "wall ratio vs cached sequential", "wall ratio vs uncached sequential", "p (judge NLL)",
                   "p (entropy)", "flag"]
        rows, flagged = [], []
        stats: dict[str, dict] = {}
        for s, rs in recs.items():
            if not rs:
                continue
            nll = [r.judge_nll for r in rs]
            ent = [_entropy(r.generated) for r in rs]
            ratio = [seq_secs[r.index] / r.seconds for r in rs if r.index in seq_secs and r.seconds > 0]
            ratio_c = [cached_secs[r.index] / r.seconds for r in rs if r.index in cached_secs and r.seconds > 0]
            tpr = [r.masked / r.rounds for r in rs if r.rounds]
            tpc = [r.masked / r.calls for r in rs if r.calls]
            p_nll = welch(nll, [r.judge_nll for r in seq]) if s != "sequential" and have_judge else float("nan")
            p_ent = welch(ent, [_entropy(r.generated) for r in seq]) if s != "sequential" else float("nan")
            flag = ""
            if s != "sequential":
                bad = [what for what, pv in (("judge NLL", p_nll), ("entropy", p_ent)) if _finite(pv) and pv < ALPHA]
                flag = f"**differs ({', '.join(bad)})**" if bad else "ok"
                if bad:
                    flagged.append(f"{s} ({', '.join(bad)})")
            st = {"tpc": mean_se(tpc), "ratio": mean_se(ratio), "ratio_c": mean_se(ratio_c),
                  "calls": mean_se([r.calls for r in rs]),
                  "ratio_c_total": sum(cached_secs.get(r.index, 0.0) for r in rs) / max(1e-12, sum(r.seconds for r in rs)),
                  "ratio_total": sum(seq_secs.get(r.index, 0.0) for r in rs) / max(1e-12, sum(r.seconds for r in rs))}
            stats[s] = st
            rows.append([s, str(len(rs)), fmt_se(*mean_se(nll), 3) if have_judge else "n/a", fmt_se(*mean_se(ent), 3),
                         fmt_se(*st["calls"], 1), fmt_se(*mean_se(tpr)), fmt_se(*st["tpc"]), fmt_se(*st["ratio_c"]),
                         fmt_se(*st["ratio"]),
                         fmt_p(p_nll), fmt_p(p_ent), flag])
        out = md_table(headers, rows)
        tested = [s for s in recs if s != "sequential" and recs[s]]
        if flagged:
            out.append(f"**Flagged:** {'; '.join(flagged)} differ from sequential at p < {ALPHA} "
                       f"({len(tested)} samplers tested). Exact samplers should not: this is a bug to investigate.")
        elif tested and len(seq) >= 2:
            out.append(f"No exact sampler differs from sequential in judge NLL or entropy at p < {ALPHA} "
                       f"({len(tested)} samplers, {len(seq)} inputs each).")
        elif tested:
            out.append("Too few inputs for a two-sample test (need at least 2 per sampler).")
        out.append("")
        pip = stats.get("assd-pipelined")
        if pip:
            line = (f"{domain}: pipelined ASSD {pip['tpc'][0]:.2f} ± {pip['tpc'][1]:.2f} tokens per call, wall-clock "
                    f"{pip['ratio_c'][0]:.2f} ± {pip['ratio_c'][1]:.2f}x cached sequential per input "
                    f"({pip['ratio_c_total']:.2f}x on total seconds; {pip['ratio'][0]:.2f} ± {pip['ratio'][1]:.2f}x "
                    "uncached sequential)")
            out += [line + ".", ""]
            self.headlines.append(line)
        self.headlines.append(f"{domain}: exact samplers flagged against sequential at p < {ALPHA}: "
                              + ("; ".join(flagged) if flagged else "none") + f" ({len(seq)} inputs)")
        return out

    # -- 2. acceptance
    def section_acceptance(self) -> list[str]:
        import plotly.graph_objects as go

        out = ["## 2. Acceptance explained", "",
               "For each speculative sampler, every draft that went through the acceptance test, grouped by its "
               "position in the round. Measured: the share accepted (± binomial standard error). Predicted: the mean "
               "over the same drafts of min(1, q(x)/p(x)) (proposal p, target q), an unbiased estimate of the "
               "acceptance probability 1 − TV(p, q) at that position. z = (measured − predicted) / SE. "
               "Drafts accepted without a test (the first draft of an ASSD round, pipelined exact rows) are "
               "counted separately.", ""]
        for domain in self.domains:
            out += [f"### {domain}", ""]
            recs = getattr(self, "exact_records", {}).get(domain)
            if not recs:
                out += ["_Skipped: no ASSD runs for this domain (see section 1)._", ""]
                continue
            rows, fig = [], go.Figure()
            for s in SPECULATIVE:
                rs = recs.get(s)
                if not rs:
                    continue
                by: dict[int, list[tuple[bool, float]]] = {}
                for r in rs:
                    for pos, acc, a in r.events:
                        by.setdefault(pos, []).append((acc, a))
                untested = sum(r.untested for r in rs)
                xs, meas, meas_se, pred, pred_se = [], [], [], [], []
                for pos in sorted(by):
                    ev = by[pos]
                    n = len(ev)
                    m = sum(acc for acc, _ in ev) / n
                    mse = math.sqrt(m * (1 - m) / n)
                    pm, pse = mean_se([a for _, a in ev])
                    z = (m - pm) / mse if mse > 0 else float("nan")
                    rows.append([s, str(pos), str(n), fmt_se(m, mse, 3), fmt_se(pm, pse, 3), fmt(z, 2),
                                 str(untested) if pos == min(by) else ""])
                    xs.append(pos)
                    meas.append(m)
                    meas_se.append(mse)
                    pred.append(pm)
                    pred_se.append(pse)
                if not by:
                    rows.append([s, "-", "0", "n/a", "n/a", "n/a", str(untested)])
                if s == "assd" and xs:
                    fig.add_trace(go.Scatter(x=xs, y=meas, mode="markers", name="measured acceptance",
                                             error_y={"type": "data", "array": meas_se}))
                    fig.add_trace(go.Scatter(x=xs, y=pred, mode="lines+markers", name="predicted 1 − TV(p, q)",
                                             error_y={"type": "data", "array": pred_se}))
            out += md_table(["sampler", "position in round", "tested drafts", "measured rate", "predicted rate",
                             "z", "accepted untested"], rows)
            if fig.data:
                fig.update_layout(title=f"{domain}: ASSD acceptance by position in round (k = {self.plan.k})",
                                  xaxis_title="position in round", yaxis_title="acceptance rate", xaxis_dtick=1,
                                  yaxis_range=[0, 1.05], template="plotly_white", width=900, height=500)
                out += [self.figure(f"acceptance-{domain}", fig), ""]
                ev = [e for r in recs.get("assd", []) for e in r.events]
                if ev:
                    m = sum(a for _, a, _ in ev) / len(ev)
                    pm = statistics.fmean(x for _, _, x in ev)
                    out += [f"Over all positions, ASSD accepted {m:.3f} of {len(ev)} tested drafts; "
                            f"the proposal/target prediction is {pm:.3f}.", ""]
        return out

    # -- 3. self-spec vs MDM
    def section_self_spec(self) -> list[str]:
        p = self.plan
        out = ["## 3. Self-speculative sampling against MDM", "",
               f"Hybrid models on {int(0.95 * 100)}%-masked test windows of {p.ss_length} tokens, {p.ss_samples} "
               f"inputs, the same seeds for every setting (engine.lab.bench_selfspec.run_bench). MDM with T in "
               f"{p.mdm_steps}; self-speculative with (dtau, inner loops) in {p.self_spec}. Calls are in units of one "
               "full pass of the hybrid; MDM is credited with its best case (a step that reveals nothing is free, "
               "as the self-speculative paper counts it), and its raw count is shown beside it. Matched quality: for "
               "each self-speculative setting, the best-case calls MDM needs to reach the same quality, read off the "
               "piecewise-linear MDM quality-against-calls curve; the ratio is MDM calls / self-speculative calls "
               "(above 1: self-speculative is cheaper).", ""]
        from .bench_selfspec import run_bench

        for domain in self.domains:
            out += [f"### {domain}", ""]
            why = self.domain_ready(domain)
            hybrid = self.models.get(domain, "hybrid")
            if why or hybrid is None:
                out += [f"_Skipped: {why}_" if why else self.missing_note(domain, "hybrid"), ""]
                continue
            length = min(p.ss_length, hybrid.max_tokens)
            log(f"self-spec vs MDM: {domain}, {p.ss_samples} inputs of {length} tokens")
            try:
                res = run_bench(hybrid.ref, p.ss_samples, length, 0.95, p.seed, mdm_steps=p.mdm_steps,
                                self_spec=p.self_spec)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                out += [f"{ERROR_MARK}: run_bench failed ({type(e).__name__}: {e}).", ""]
                continue
            out += self._self_spec_body(domain, res, hybrid)
        return out

    def _self_spec_body(self, domain: str, res: dict, hybrid: ModelInfo) -> list[str]:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        rows = res["rows"]
        metrics = list(dict.fromkeys(r["quality_metric"] for r in rows))
        shown = [m for m in metrics if m != "entropy"]  # entropy has its own column
        settings: dict[tuple[str, str], dict] = {}
        for r in rows:
            d = settings.setdefault((r["sampler"], r["setting"]), {"calls": r["calls_best_mean"],
                                                                   "raw": r["calls_mean"], "entropy": r["entropy"]})
            d[r["quality_metric"]] = r["quality"]
        # the metric to match on: judge NLL first, then spelling, then entropy
        primary = next((m for m in metrics if m.startswith("judge_nll")), None) or \
            next((m for m in metrics if m == "spelling_accuracy"), None) or (metrics[0] if metrics else "entropy")
        lower_better = primary.startswith("judge_nll")
        mdm = sorted(((d["calls"], d.get(primary, float("nan"))) for (s, _), d in settings.items() if s == "mdm"),
                     key=lambda t: t[0])
        table, ratios = [], []
        for (s, setting), d in settings.items():
            ratio_txt = ""
            if s == "self-spec":
                matched, kind = match_calls(mdm, d.get(primary, float("nan")), lower_better)
                if matched is not None and d["calls"] > 0:
                    r = matched / d["calls"]
                    ratio_txt = {"exact": f"{r:.2f}", "upper": f"≤ {r:.2f}", "lower": f"≥ {r:.2f}"}[kind]
                    ratios.append((r, kind, setting))
                else:
                    ratio_txt = "n/a"
            table.append([s, setting, fmt(d["calls"], 2), fmt(d["raw"], 2)]
                         + [fmt(d.get(m, float("nan")), 3) for m in shown] + [fmt(d["entropy"], 3), ratio_txt])
        out = md_table(["sampler", "setting", "calls (best case)", "calls (raw)", *shown, "entropy (bits)",
                        "MDM/self-spec calls at matched quality"], table)
        fig = make_subplots(rows=1, cols=2, subplot_titles=(primary, "unigram entropy (bits)"))
        for s in ("mdm", "self-spec"):
            pts = sorted(((d["calls"], d.get(primary, float("nan")), d["entropy"], st)
                          for (ss, st), d in settings.items() if ss == s), key=lambda t: t[0])
            if not pts:
                continue
            xs = [t[0] for t in pts]
            color = PALETTE[0 if s == "mdm" else 1]
            fig.add_trace(go.Scatter(x=xs, y=[t[1] for t in pts], mode="lines+markers+text", name=s,
                                     text=[t[3] for t in pts], textposition="top center", legendgroup=s,
                                     line={"color": color}), row=1, col=1)
            fig.add_trace(go.Scatter(x=xs, y=[t[2] for t in pts], mode="lines+markers", name=s,
                                     text=[t[3] for t in pts], legendgroup=s, showlegend=False,
                                     line={"color": color}), row=1, col=2)
        fig.update_xaxes(type="log", title_text="network calls (full-pass units, MDM best case)")
        fig.update_layout(title=f"{domain}: quality against calls, {hybrid.name} ({res['samples']} inputs of "
                                f"{res['length']} tokens)", template="plotly_white", width=1100, height=480)
        out += [self.figure(f"self-spec-{domain}", fig), ""]
        out.append(f"Quality metric matched: `{primary}` ({'lower' if lower_better else 'higher'} is better).")
        if not any(m.startswith("judge_nll") for m in metrics):
            out.append("No judge NLL rows came back from run_bench for this domain, so the match uses "
                       f"`{primary}`.")
        if ratios:
            best = max(ratios, key=lambda t: t[0])
            exact = [t for t in ratios if t[1] == "exact"]
            line = (f"{domain}: self-speculative calls ratio at matched {primary}: best "
                    f"{'≤ ' if best[1] == 'upper' else '≥ ' if best[1] == 'lower' else ''}{best[0]:.2f}x "
                    f"({best[2]})")
            if exact:
                line += "; interpolated ratios " + ", ".join(f"{t[0]:.2f}x ({t[2]})" for t in exact)
            out.append(line + ".")
            self.headlines.append(line)
        out += ["", self.models.caption(hybrid, seeds=f"inputs seed {self.plan.seed}, input i runs with seed "
                                                      f"{self.plan.seed}+i"), ""]
        return out

    # -- 4. HumanEval
    def section_humaneval(self) -> list[str]:
        p = self.plan
        lim = p.humaneval_limit
        out = ["## 4. HumanEval single-line infilling", "",
               f"pass@1 of single-line infills (engine.lab.evaluate.humaneval_pass1: each task's tests run in a separate "
               f"process with a timeout) on {'all tasks' if lim is None else f'a seeded subset of {lim} tasks'} "
               f"(`--humaneval-limit`), the same tasks and seeds for every sampler. pass@1 ± binomial standard error; "
               f"p: Fisher exact test of the pass counts against sequential, flagged when p < {ALPHA}.", ""]
        if "code" not in self.domains:
            return out + ["_Skipped: the code domain is not in `--domains`._", ""]
        asarm = self.models.get("code", "asarm")
        if asarm is None:
            return out + [self.missing_note("code", "asarm"), ""]
        try:
            from .data import load_humaneval_single_line

            all_tasks = load_humaneval_single_line()
        except Exception as e:  # noqa: BLE001
            return out + [f"_Skipped: {type(e).__name__}: {e}_", ""]
        from scipy.stats import fisher_exact

        from .evaluate import humaneval_pass1

        hybrid = self.models.get("code", "hybrid")
        notes: list[str] = []
        drafts = {a.sampler: a.draft for a in self.sampler_arms("code", asarm, p.samplers, notes)}
        samplers = [s for s in p.samplers if s in drafts]
        tasks = random.Random(0).sample(all_tasks, min(lim, len(all_tasks))) if lim else all_tasks
        tokens = sum(len(asarm.lm.codec.encode(t["middle"])) for t in tasks)  # same selection as humaneval_pass1
        rows, res_by = [], {}
        for s in samplers:
            log(f"HumanEval: {s} on {len(tasks)} tasks")
            try:
                r = humaneval_pass1(asarm.ref, lim, sampler=s,
                                    draft_model=drafts[s].ref if drafts[s] is not None else None)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                notes.append(f"{ERROR_MARK}: {s} failed ({type(e).__name__}: {e}).")
                continue
            n = r["humaneval_tasks"]
            pr = r["humaneval_single_line_pass1"]
            tpc = r.get("humaneval_tokens_per_call")
            calls = r.get("humaneval_calls_mean")
            if calls is None and tpc:
                calls = tokens / tpc / n
            res_by[s] = (round(pr * n), n)
            p_val = float("nan")
            if s != "sequential" and "sequential" in res_by:
                a, b = res_by[s], res_by["sequential"]
                p_val = float(fisher_exact([[a[0], a[1] - a[0]], [b[0], b[1] - b[0]]])[1])
            flag = "" if s == "sequential" else ("**differs**" if _finite(p_val) and p_val < ALPHA else "ok")
            rows.append([s, str(n), fmt_se(pr, math.sqrt(pr * (1 - pr) / n), 3), fmt(calls, 1), fmt(tpc, 2),
                         fmt(r.get("humaneval_seconds"), 1), fmt_p(p_val), flag])
        out += md_table(["sampler", "tasks", "pass@1", "calls per task", "tokens/call", "seconds", "p (vs sequential)",
                         "flag"], rows)
        out += [f"- {n}" for n in notes] + ([""] if notes else [])
        out += [self.models.caption(asarm, hybrid, seeds="tasks: random.Random(0) sample; task i runs with seed i"), ""]
        return out

    # -- 5. scaling
    def section_scaling(self) -> list[str]:
        p = self.plan
        out = ["## 5. Scaling", "",
               f"Calls and wall time per input against sequence length ({', '.join(map(str, p.scaling_lengths))} "
               f"tokens at 95% masked) and masking rate ({', '.join(f'{r:g}' for r in p.scaling_rates)} at "
               f"{p.scaling_length} tokens), {p.scaling_samples} inputs per point, every sampler on the same inputs. "
               f"MDM runs with T = {p.scaling_mdm_steps}, self-speculative with dtau = {p.scaling_dtau:g}. "
               "Slopes are least-squares fits of log(cost) on log(masked tokens).", ""]
        for domain in self.domains:
            out += [f"### {domain}", ""]
            why = self.domain_ready(domain)
            asarm = self.models.get(domain, "asarm")
            if why or asarm is None:
                out += [f"_Skipped: {why}_" if why else self.missing_note(domain, "asarm"), ""]
                continue
            try:
                out += self._scaling_domain(domain, asarm)
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                out += [f"{ERROR_MARK}: scaling failed ({type(e).__name__}: {e}).", ""]
        return out

    def sampler_arms(self, domain: str, asarm: ModelInfo, samplers: list[str], notes: list[str]) -> list[Arm]:
        """An arm per AS-ARM sampler; one that needs a second network (DRAFTER_KIND) gets the domain's
        drafter, or is skipped with a note when there is none."""
        from ..samplers import DRAFTER_KIND

        arms = []
        for s in samplers:
            kind = DRAFTER_KIND.get(s)
            draft = self.models.get(domain, kind) if kind else None
            if kind and draft is None:
                notes.append(f"{s} skipped: no drafter ({self.models.missing.get(f'{domain}-{kind}')}).")
                continue
            arms.append(Arm(s, s, asarm, draft=draft))
        return arms

    def _scaling_arms(self, domain: str, asarm: ModelInfo) -> tuple[list[Arm], ModelInfo | None, list[str]]:
        p = self.plan
        hybrid = self.models.get(domain, "hybrid")
        notes: list[str] = []
        arms = self.sampler_arms(domain, asarm, [s for s in p.samplers if s != "assd-diffusion" or hybrid], notes)
        if hybrid is not None:
            arms.append(Arm(f"mdm (T={p.scaling_mdm_steps})", "mdm", hybrid, {"steps": p.scaling_mdm_steps}))
            arms.append(Arm(f"self-spec (dtau={p.scaling_dtau:g})", "self-spec", hybrid, {"dtau": p.scaling_dtau}))
        else:
            notes.append(f"assd-diffusion, mdm and self-spec skipped: {self.models.missing.get(domain + '-hybrid')}.")
        return arms, hybrid, notes

    def _sweep(self, arms: list[Arm], points: list[tuple[int, float]], notes: list[str]) -> dict:
        """(length, rate) -> label -> {calls, seconds, masked} (lists over inputs)."""
        p = self.plan
        res: dict = {}
        for length, rate in points:
            models = {a.model.name: a.model for a in arms}
            inputs = {name: windows(m, length, rate, p.scaling_samples, p.seed) for name, m in models.items()}
            log(f"scaling: length {length}, mask rate {rate:g}, {len(arms)} samplers")
            recs = measure(inputs, arms, p.seed, p.k, notes, warmup=False)
            res[(length, rate)] = {lab: {"calls": [r.calls for r in rs], "seconds": [r.seconds for r in rs],
                                         "masked": [r.masked for r in rs]} for lab, rs in recs.items() if rs}
        return res

    def _scaling_domain(self, domain: str, asarm: ModelInfo) -> list[str]:
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        p = self.plan
        arms, hybrid, notes = self._scaling_arms(domain, asarm)
        window = min(m.max_tokens for m in [asarm] + ([hybrid] if hybrid else []))
        lengths = [n for n in p.scaling_lengths if n <= window]
        too_long = [n for n in p.scaling_lengths if n > window]
        if too_long:
            notes.append(f"length {', '.join(map(str, too_long))} skipped: exceeds the models' {window}-token window.")
        rate_len = min(p.scaling_length, window)
        # one unrecorded pass of every arm on a short input, so first-call costs land nowhere
        used = {a.model.name: a.model for a in arms}
        measure({n: windows(m, min(lengths or [rate_len]), 0.95, 1, p.seed) for n, m in used.items()}, arms,
                p.seed, p.k, [], warmup=False)
        by_len = self._sweep(arms, [(n, 0.95) for n in lengths], notes)
        by_rate = self._sweep(arms, [(rate_len, r) for r in p.scaling_rates], notes)
        labels = [a.label for a in arms if any(a.label in v for v in list(by_len.values()) + list(by_rate.values()))]
        out: list[str] = []
        fig = make_subplots(rows=2, cols=2, subplot_titles=("calls vs length", "seconds vs length",
                                                            "calls vs mask rate", "seconds vs mask rate"))
        slopes: dict[str, dict[str, float]] = {}
        for title, sweep, keyname, xs, col in (("length", by_len, "L", lengths, 0), ("mask rate", by_rate, "rate",
                                                                                    list(p.scaling_rates), 1)):
            keys = [(n, 0.95) for n in xs] if col == 0 else [(rate_len, r) for r in xs]
            heads = [f"{keyname}={n if col == 0 else f'{n:g}'}" for n in xs]
            calls_rows, sec_rows = [], []
            masked_row = ["masked tokens"] + [fmt(statistics.fmean(next(iter(sweep[k].values()))["masked"]), 1)
                                              if sweep.get(k) else "n/a" for k in keys]
            for lab in labels:
                cr, sr, mx, cm, sm = [lab], [lab], [], [], []
                for k in keys:
                    d = sweep.get(k, {}).get(lab)
                    if not d:
                        cr.append("n/a")
                        sr.append("n/a")
                        continue
                    c, s = mean_se(d["calls"]), mean_se(d["seconds"])
                    cr.append(fmt_se(*c, 1))
                    sr.append(fmt_se(*s, 3))
                    mx.append(statistics.fmean(d["masked"]))
                    cm.append(c[0])
                    sm.append(s[0])
                bc, bs = loglog_slope(mx, cm), loglog_slope(mx, sm)
                bpc = loglog_slope(mx, [s / c if c else float("nan") for s, c in zip(sm, cm)])
                slopes.setdefault(lab, {})[f"{keyname}_calls"] = bc
                slopes[lab][f"{keyname}_seconds"] = bs
                slopes[lab][f"{keyname}_sec_per_call"] = bpc
                slopes[lab][f"{keyname}_last"] = (mx[-1], cm[-1], sm[-1]) if mx else None
                calls_rows.append(cr + [fmt(bc, 2)])
                sec_rows.append(sr + [fmt(bs, 2)])
                xplot = xs[: len(cm)] if len(cm) == len(xs) else [x for x, k in zip(xs, keys)
                                                                    if sweep.get(k, {}).get(lab)]
                color = PALETTE[labels.index(lab) % len(PALETTE)]
                fig.add_trace(go.Scatter(x=xplot, y=cm, mode="lines+markers", name=lab, legendgroup=lab,
                                         line={"color": color}, showlegend=col == 0), row=col + 1, col=1)
                fig.add_trace(go.Scatter(x=xplot, y=sm, mode="lines+markers", name=lab, legendgroup=lab,
                                         line={"color": color}, showlegend=False), row=col + 1, col=2)
            out += [f"Calls per input against {title}:", ""]
            out += md_table(["sampler"] + heads + ["slope"], [masked_row + [""]] + calls_rows)
            out += [f"Seconds per input against {title}:", ""]
            out += md_table(["sampler"] + heads + ["slope"], sec_rows)
        fig.update_xaxes(title_text="sequence length (tokens)", row=1)
        fig.update_xaxes(title_text="mask rate", row=2)
        fig.update_layout(title=f"{domain}: cost against length and masking rate ({asarm.name})",
                          template="plotly_white", width=1100, height=800)
        out += [self.figure(f"scaling-{domain}", fig), ""]
        out += self._scaling_sentences(slopes)
        out += [f"- {n}" for n in notes] + ([""] if notes else [])
        out += [self.models.caption(asarm, hybrid, seeds=f"inputs seed {p.seed}, input i runs with seed {p.seed}+i"),
                ""]
        return out

    def _scaling_sentences(self, slopes: dict[str, dict[str, float]]) -> list[str]:
        if not slopes:
            return []
        lines = ["Growth with the number of masked tokens n (length sweep): " + "; ".join(
            f"{lab}: calls {growth_words(d.get('L_calls', float('nan')))}, wall time "
            f"{growth_words(d.get('L_seconds', float('nan')))}" for lab, d in slopes.items()) + "."]
        linear = [lab for lab, d in slopes.items() if _finite(d.get("L_calls")) and 0.85 <= d["L_calls"] <= 1.15]
        if linear:
            lines.append(f"Calls grow linearly with the work for: {', '.join(linear)}.")
        a, c = slopes.get("assd"), slopes.get("assd-cache")
        if a and c and _finite(a.get("L_seconds")) and _finite(c.get("L_seconds")):
            la, lc = a.get("L_last"), c.get("L_last")
            same_calls = la and lc and abs(la[1] - lc[1]) <= 0.01 * max(la[1], 1e-9)
            s = (f"Caching (assd-cache against assd, same samples): the wall-time slope is {c['L_seconds']:.2f} "
                 f"with the cache and {a['L_seconds']:.2f} without; seconds per call grow with slope "
                 f"{fmt(c.get('L_sec_per_call'))} with it and {fmt(a.get('L_sec_per_call'))} without")
            if la and lc:
                s += (f"; at {la[0]:.0f} masked tokens assd takes {la[2]:.3f} s and assd-cache {lc[2]:.3f} s per input "
                      f"({la[2] / lc[2]:.2f}x)" if lc[2] > 0 else "")
            s += ". " + ("Calls are identical with and without the cache: it changes the cost per call, not the "
                         "number of calls." if same_calls else "Calls differ between the two runs.")
            lines.append(s)
        return lines + [""]

    # -- 6. provenance
    def section_provenance(self, command: str, started: float) -> list[str]:
        rows = []
        for m in self.models.used.values():
            st = m.train_state
            rows.append([m.name, m.kind, m.domain, f"`{m.sha256}`", str(st.get("steps", "n/a")),
                         fmt(st.get("valid_loss", float("nan")), 3), str(m.max_tokens), _rel(m.path)])
        out = ["## 6. Provenance", "", f"Regenerate with: `{command}`", ""]
        out += md_table(["model", "kind", "domain", "model.safetensors sha256", "train steps", "valid loss",
                         "window (tokens)", "path"], rows)
        if self.models.missing:
            out += ["Models not used:", ""] + [f"- {k}: {v}" for k, v in sorted(self.models.missing.items())] + [""]
        p = self.plan
        out += [
            f"- Date: {DATE}",
            f"- Machine: {os.cpu_count()} cores, CPU model {cpu_model()}, models on {device_name()}, "
            f"torch threads {torch.get_num_threads()}, "
            f"{platform.machine()}, {platform.system()} {platform.release()}",
            f"- Software: Python {platform.python_version()}, torch {torch.__version__}",
            f"- Code: {git_rev()}",
            f"- Seeds: inputs from `masked_windows(seed={p.seed})`; input i runs with seed {p.seed}+i for every "
            "sampler; HumanEval tasks `random.Random(0)`, task i with seed i.",
            f"- Mode: {'quick' if p.quick else 'full'}; inputs {p.samples} (section 1), {p.ss_samples} (section 3), "
            f"{p.scaling_samples} per point (section 5); k = {p.k}",
            f"- Data: INFILL_DATA_DIR={os.environ.get('INFILL_DATA_DIR', 'data')}",
            f"- Runtime: {time.time() - started:.0f} s in all; " + ", ".join(
                f"{k} {v:.0f} s" for k, v in self.section_seconds.items()),
            "",
        ]
        return out


def _entropy(tokens: list[int]) -> float:
    from .metrics import unigram_entropy

    return unigram_entropy(tokens)



def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def git_rev() -> str:
    try:
        root = Path(__file__).resolve().parents[2]
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True,
                               timeout=10).stdout.strip()
        return f"git {rev}{' (uncommitted changes)' if dirty else ''}" if rev else "not a git checkout"
    except Exception:  # noqa: BLE001
        return "git unavailable"


def match_calls(mdm: list[tuple[float, float]], target: float, lower_better: bool) -> tuple[float | None, str]:
    """Smallest calls at which the piecewise-linear MDM curve reaches `target` quality.
    ("exact", c) interpolated; ("upper", c0) already reached at the cheapest setting; ("lower", cmax)
    never reached (the ratio is then a lower bound)."""
    pts = [(c, q) for c, q in mdm if _finite(c) and _finite(q)]
    if not pts or not _finite(target):
        return None, ""

    def good(q: float) -> bool:
        return q <= target if lower_better else q >= target

    if good(pts[0][1]):
        return pts[0][0], "upper"
    for (c0, q0), (c1, q1) in zip(pts, pts[1:]):
        if good(q1):
            t = (target - q0) / (q1 - q0) if q1 != q0 else 1.0
            return c0 + t * (c1 - c0), "exact"
    return pts[-1][0], "lower"


def export_figures(figs: dict[str, object], fig_dir: Path) -> tuple[dict[str, Path], str]:
    """PNG through kaleido (system Chromium); HTML where that fails. Returns paths and how."""
    fig_dir.mkdir(parents=True, exist_ok=True)
    if not figs:
        return {}, "no figures"
    if not os.environ.get("BROWSER_PATH") and Path("/usr/bin/chromium").exists():
        os.environ["BROWSER_PATH"] = "/usr/bin/chromium"
    names = list(figs)
    paths = {n: fig_dir / f"{n}.png" for n in names}
    err = ""
    try:
        import plotly.io as pio

        pio.write_images([figs[n] for n in names], [str(paths[n]) for n in names],
                         width=[figs[n].layout.width or 1000 for n in names],
                         height=[figs[n].layout.height or 560 for n in names])
        if all(paths[n].is_file() and paths[n].stat().st_size > 0 for n in names):
            return paths, "PNG via plotly + kaleido (system Chromium)"
        err = "kaleido wrote no file"
    except Exception as e:  # noqa: BLE001
        err = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    log(f"static figure export failed ({err}); writing HTML instead")
    out = {}
    for n in names:
        p = fig_dir / f"{n}.html"
        figs[n].write_html(str(p), include_plotlyjs=True)
        out[n] = p
    return out, f"HTML (static PNG export failed: {err})"


def cli(argv: list[str]) -> int:
    global MACHINE_SHORT, DATE
    ap = argparse.ArgumentParser(prog="python -m engine report", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few inputs, short windows: minutes, for CI")
    ap.add_argument("--samples", type=int, default=None, help="inputs for section 1 (default 100; quick 2)")
    ap.add_argument("--domains", default=",".join(DOMAINS), help="comma-separated: text,code,protein")
    ap.add_argument("--out", default="docs/RESULTS.md", help="markdown file; figures go to figures/ beside it")
    ap.add_argument("--humaneval-limit", type=int, default=None,
                    help="HumanEval tasks (default 100; quick 3; 0 = all 1033)")
    ap.add_argument("--k", type=int, default=5, help="draft length per round")
    ap.add_argument("--samplers", default=None,
                    help=f"exact samplers to measure (sequential always runs; default all: {','.join(EXACT)})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (of the main process)")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes measuring inputs in parallel in sections 1 and 5 (one torch thread each)")
    ap.add_argument("--scaling-samples", type=int, default=None, help="inputs per point in section 5")
    ap.add_argument("--ss-samples", type=int, default=None, help="inputs for section 3 (self-spec vs MDM)")
    ap.add_argument("--models-dir", default=None,
                    help="take <domain>-<kind> models from this folder only (default: the registry)")
    from ..cli import add_device_arg
    from ..device import apply_device_flag

    add_device_arg(ap)
    a = ap.parse_args(argv)
    device = apply_device_flag(a.device)  # checked now: a model that fails to load is only noted later
    domains = [d.strip() for d in a.domains.split(",") if d.strip()]
    bad = [d for d in domains if d not in DOMAINS]
    if bad:
        ap.error(f"unknown domain(s) {bad}; choose from {DOMAINS}")
    bad = [s for s in (a.samplers or "").split(",") if s.strip() and s.strip() not in EXACT]
    if bad:
        ap.error(f"unknown sampler(s) {bad}; choose from {EXACT}")
    set_threads(a.threads)
    global WORKERS
    WORKERS = max(1, a.workers)
    started = time.time()
    DATE = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    MACHINE_SHORT = (f"{os.cpu_count()} cores {cpu_model()}, {device_name(device)}, "
                     f"torch threads {torch.get_num_threads()}") + (
        f", {WORKERS} worker processes of 1 thread each in sections 1 and 5" if WORKERS > 1 else "")
    plan = make_plan(a)
    command = "python -m engine report" + ("" if not argv else " " + shlex.join(argv))
    out_path = Path(a.out)
    fig_dir = out_path.parent / "figures"
    models = Models(Path(a.models_dir) if a.models_dir else None)
    rep = Report(plan, models, domains, fig_dir, "figures")
    body: list[str] = []
    for title, fn in (("exact", rep.section_exact), ("acceptance", rep.section_acceptance),
                      ("self-spec", rep.section_self_spec), ("humaneval", rep.section_humaneval),
                      ("scaling", rep.section_scaling)):
        t0 = time.time()
        try:
            body += fn()
        except Exception as e:  # noqa: BLE001 - one broken section must not lose the others
            traceback.print_exc()
            body += [f"{ERROR_MARK}: section {title} failed ({type(e).__name__}: {e}).", ""]
        rep.section_seconds[title] = time.time() - t0
        log(f"section {title} done in {rep.section_seconds[title]:.0f} s")
    t0 = time.time()
    paths, how = export_figures(rep.figures, fig_dir)
    rep.section_seconds["figures"] = time.time() - t0
    head = [
        "# Results",
        "",
        f"Regenerate with: `{command}`",
        "",
        f"Generated {DATE} on {MACHINE_SHORT} in {'quick' if plan.quick else 'full'} mode; domains "
        f"{', '.join(domains)}. Figures: {how}. Every number below is measured in this run; numbers from different "
        "runs or machines are not comparable (timings are only compared within one run).",
        "",
    ]
    if plan.quick:
        head += ["**Quick mode:** a handful of short inputs — a smoke test of the pipeline, not evidence. "
                 "Run without `--quick` for the real tables.", ""]
    head += ["## Headlines", ""] + ([f"- {h}" for h in rep.headlines] or ["- (no measurements)"]) + [""]
    lines = head + body + rep.section_provenance(command, started)
    text = "\n".join(lines)
    for name, p in paths.items():
        rel = f"{rep.rel_fig}/{p.name}"
        link = f"![{name}]({rel})" if p.suffix == ".png" else f"[{name} (interactive HTML)]({rel})"
        text = text.replace(f"{{{{FIG:{name}}}}}", link)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(text + "\n")
    log(f"wrote {out_path} ({len(paths)} figures, {time.time() - started:.0f} s)")
    print(out_path)
    return 0
