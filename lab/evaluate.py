"""`python -m engine eval`: the numbers on the model cards, measured on held-out data.

Per model: held-out NLL per token and perplexity. AS-ARM and judge: left-to-right joint NLL of
test windows (everything masked but BOS) and, for the AS-ARM, the joint NLL of 95%-masked windows.
Hybrid: the non-causal (MDM) cross-entropy of 95%-masked windows. Per domain: text spelling
accuracy of 95%-masked infills; code HumanEval single-line infilling pass@1 (each task's tests run
in a separate process with a timeout, never in this one); protein perplexity against the unigram
baseline of the training split.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import torch

from engine.inputs.domains import DOMAINS, studio_domains
from engine.inputs.masking import parse_masked_text
from engine.loading.registry import available, load

from .cards import DATA_TEXT, KIND_TEXT, stored_dtype, train_command, write_card  # noqa: F401 (callers import them from here)
from .metrics import spelling_accuracy, train_words
from .progress import add_quiet_arg, set_quiet
from .runs import drain
from .shard import is_main, shard_map
from .workloads import masked_windows, separator_ids

WINDOW = 256  # tokens per held-out window, every domain (a model with a shorter context uses its own)


@torch.no_grad()
def _windows(domain: str, codec, length: int, n: int) -> torch.Tensor:
    from .data import load_split

    ids: list[int] = []
    sep = separator_ids(domain, codec)
    for doc in load_split(domain, "test"):
        ids += codec.encode(doc) + sep
        if len(ids) > n * length + 1:
            break
    rows = [ids[i * length : (i + 1) * length] for i in range(min(n, len(ids) // length))]
    return torch.tensor([[codec.bos_id] + r for r in rows])


@torch.no_grad()
def heldout_nll(name: str, n: int = 32, corpus: str | None = None) -> dict:
    """Per-token NLL of a model on held-out windows (joint for an AS-ARM or judge, the two heads
    for a hybrid): the quality number of its model card."""
    lm = load(name)
    model = lm.model
    x = _windows(corpus or lm.domain, lm.codec, min(WINDOW, lm.max_tokens), n).to(model.device)
    gen = torch.Generator().manual_seed(0)  # masks drawn on the CPU: the same masks on every device
    out: dict = {}
    if lm.kind in ("asarm", "judge"):
        masked = torch.ones_like(x, dtype=torch.bool)
        masked[:, 0] = False
        nll = float(model.joint_loss(x, masked))
        out.update(nll_left_to_right=nll, ppl_left_to_right=math.exp(nll))
        if lm.kind == "asarm":
            m95 = (torch.rand(x.shape, generator=gen) < 0.95).to(x.device)
            m95[:, 0] = False
            out["nll_95_masked"] = float(model.joint_loss(x, m95))
    elif lm.kind == "hybrid":
        nll = _noncausal_nll(model, x, 0.95, gen)
        out.update(nll_95_masked_noncausal=nll, ppl_95_masked_noncausal=math.exp(nll))
        if quality_of(lm.domain) == BITS_PER_CHAR:  # how much the model gains from context (the character experiment)
            out["bits_per_char_noncausal_by_mask_rate"] = {
                f"{r:g}": _noncausal_nll(model, x, r, gen) / math.log(2) for r in (0.95, 0.5, 0.05)}
    out["test_tokens"] = int(x.numel() - x.shape[0])
    return out


def _noncausal_nll(model, x: torch.Tensor, rate: float, gen: torch.Generator) -> float:
    """Mean NLL (nats) of the hybrid's non-causal head at the masked positions, `rate` of them masked."""
    m = (torch.rand(x.shape, generator=gen) < rate).to(x.device)
    m[:, 0] = False
    _, logits = model.noncausal(x.masked_fill(m, model.config.mask_token_id))
    logits = logits.masked_fill(model.special_mask(), float("-inf"))
    return float(torch.nn.functional.cross_entropy(logits[m].float(), x[m]))


def text_spelling(name: str, n: int, sampler: str = "assd-pipelined") -> dict:
    """Share of generated words found in the training vocabulary on 95%-masked text windows: a
    crude but model-free check that fills are words."""
    lm = load(name)
    inputs = masked_windows("text", lm.codec, min(256, lm.max_tokens), 0.95, n, seed=0, max_tokens=lm.max_tokens)

    def spans(i: int, mi) -> list[str]:
        return [sp.text for sp in drain(lm, mi, sampler, i).result.spans]  # generated words only

    texts = [t for one in shard_map(spans, inputs, desc=f"eval {name}: spelling") for t in one]
    return {"spelling_accuracy_95": spelling_accuracy(texts, train_words("text")), "spelling_inputs": len(inputs),
            "spelling_spans": len(texts),
            "spelling_sampler": sampler}


def run_tests_in_subprocess(program: str, timeout: float = 10.0) -> bool:
    """Run a HumanEval program in a fresh, isolated interpreter (no site, no user env, no proxies)."""
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "prog.py"
        f.write_text(program)
        env = {"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0", "no_proxy": "*"}
        try:
            p = subprocess.run([sys.executable, "-I", str(f)], cwd=d, env=env, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return p.returncode == 0


def humaneval_pass1(name: str, limit: int | None, sampler: str = "assd-pipelined",
                    draft_model: str | None = None) -> dict:
    """Single-line infilling: the true middle line's token count is masked, context is cut to the
    model's window around it for generation, and the full program runs against the task's tests."""
    from .data import load_humaneval_single_line

    lm = load(name)
    tasks = load_humaneval_single_line()
    if limit:
        tasks = random.Random(0).sample(tasks, min(limit, len(tasks)))
    t0 = time.time()

    def one(i: int, t: dict) -> tuple[bool, float, int]:
        """(passed, calls, masked tokens) of task i, seed i."""
        n = len(lm.codec.encode(t["middle"]))
        pre, suf = lm.codec.encode(t["prefix"]), lm.codec.encode(t["suffix"])
        room = lm.max_tokens - n
        keep_pre = min(len(pre), max(room // 2, room - len(suf)))
        keep_suf = min(len(suf), room - keep_pre)
        text = lm.codec.decode(pre[len(pre) - keep_pre :]) + f"[MASK:{n}]" + lm.codec.decode(suf[:keep_suf])
        mi = parse_masked_text(text, lm.codec, max_tokens=lm.max_tokens + 8)
        res = drain(lm, mi, sampler, i, draft_model=draft_model).result
        program = t["prefix"] + res.spans[0].text + t["suffix"] + "\n\n" + t["test"] + f"\ncheck({t['entry_point']})\n"
        return run_tests_in_subprocess(program), float(res.calls), int(res.masked_tokens)

    results = shard_map(one, tasks, desc=f"eval {name}: HumanEval")
    passed = sum(r[0] for r in results)
    calls = sum(r[1] for r in results)
    toks = sum(r[2] for r in results)
    return {"humaneval_single_line_pass1": passed / len(tasks), "humaneval_tasks": len(tasks),
            "humaneval_tokens_per_call": toks / calls if calls else None,
            "humaneval_calls_mean": calls / len(tasks), "humaneval_sampler": sampler,
            "humaneval_seconds": time.time() - t0}


def protein_unigram(name: str) -> dict:
    """Test perplexity of the training split's residue frequencies: the baseline to beat."""
    from .data import load_split

    lm = load(name)
    c = Counter()
    for s in load_split("protein", "train"):
        c.update(lm.codec.encode(s))
    total = sum(c.values())
    x = _windows("protein", lm.codec, min(256, lm.max_tokens), 32)[:, 1:].flatten().tolist()
    nll = -sum(math.log((c[t] + 1) / (total + len(c))) for t in x) / len(x)
    return {"unigram_ppl": math.exp(nll)}


def evaluate_model(name: str, kind: str, domain: str, samples: int, humaneval_limit: int | None,
                   path: str | None = None, corpus: str | None = None) -> dict:
    """The card numbers of one checkpoint (bundled or a candidate folder), by its kind and domain;
    with `corpus`, only the held-out NLL, on that corpus's test split (e.g. `modern`)."""
    if corpus:
        return heldout_nll(name, corpus=corpus)
    if kind == "ptp":  # a drafter head: its card says how often its drafts would be accepted
        from .train_ptp import evaluate as evaluate_ptp

        return evaluate_ptp(path or name)
    m = heldout_nll(name)
    measure = QUALITY.get(quality_of(domain))
    if kind == "asarm" and measure is not None:
        m.update(measure(name, m, samples, humaneval_limit))
    return m


def _protein_quality(name: str, m: dict) -> dict:
    out = protein_unigram(name)
    out["ppl_vs_unigram"] = m["ppl_left_to_right"] / out["unigram_ppl"]
    return out


BITS_PER_CHAR = "bits_per_char_noncausal_by_mask_rate"
#: how each quality measure named in the domain registry (engine/inputs/domains.py, `quality`) is taken
#: on an AS-ARM: (name, held-out metrics so far, samples, HumanEval limit) -> metrics to add
QUALITY: dict[str, Callable[[str, dict, int, int | None], dict]] = {
    "spelling_accuracy_95": lambda name, m, samples, limit: text_spelling(name, samples),
    "humaneval_single_line_pass1": lambda name, m, samples, limit: humaneval_pass1(name, limit),
    "ppl_vs_unigram": lambda name, m, samples, limit: _protein_quality(name, m),
}


def quality_of(domain: str) -> str:
    """The domain's quality measure in the registry ('' for a corpus or an unknown domain)."""
    d = DOMAINS.get(domain)
    return d.quality if d is not None else ""


def evaluate_domain(domain: str, samples: int, humaneval_limit: int | None) -> dict:
    """Every bundled checkpoint of a domain (what `--write-cards` writes)."""
    assets = Path(__file__).resolve().parents[1] / "assets"
    return {row["name"]: evaluate_model(row["name"], row["kind"], domain, samples, humaneval_limit, row["path"])
            for row in available() if row["domain"] == domain and Path(row["path"]).is_relative_to(assets)}


def cli(argv: list[str]) -> int:
    """`python -m engine eval`: measure the bundled models, optionally writing their metrics.json."""
    ap = argparse.ArgumentParser(prog="python -m engine eval")
    ap.add_argument("--domain", choices=list(DOMAINS), action="append",
                    help=f"default: {', '.join(studio_domains())} (the others: lab experiments, e.g. chars: the "
                         "character-level experiment's hybrid)")
    ap.add_argument("--samples", type=int, default=16, help="95%%-masked inputs for spelling accuracy")
    ap.add_argument("--humaneval-limit", type=int, default=300, help="seeded subset of tasks (0: all 1,033)")
    ap.add_argument("--model", action="append", default=[],
                    help="evaluate this checkpoint folder (a candidate) instead of the bundled models; repeatable")
    ap.add_argument("--corpus", default=None, choices=["modern"],
                    help="with --model: only the held-out NLL, on this corpus's test split instead of the domain's")
    ap.add_argument("--write-cards", action="store_true", help="write metrics.json into each model folder")
    ap.add_argument("--json", action="store_true")
    from engine.cli import add_device_arg, apply_device_args

    add_device_arg(ap)
    add_quiet_arg(ap)
    a = ap.parse_args(argv)
    set_quiet(a.quiet)
    is_main()  # several processes (torchrun / accelerate launch): join them now, one GPU each
    apply_device_args(a)
    torch.manual_seed(0)
    if a.corpus and not a.model:
        ap.error("--corpus measures a candidate on another test split: give it with --model DIR")
    if a.write_cards and a.model:
        ap.error("--write-cards writes the bundled models' cards; it does not go with --model")
    out = {}
    for folder in a.model:
        lm = load(folder)
        out[folder] = evaluate_model(folder, lm.kind, lm.domain, a.samples, a.humaneval_limit, str(lm.path),
                                     corpus=a.corpus)
    for d in [] if a.model and not a.domain else a.domain or studio_domains():
        out.update(evaluate_domain(d, a.samples, a.humaneval_limit))
    if not is_main():
        return 0  # every process measured its share; the main one writes and prints
    if a.write_cards:
        for name, m in out.items():
            write_card(load(name).path, m)
    if a.json:
        print(json.dumps(out))
    else:
        for name, m in out.items():
            print(name, " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in m.items()))
    return 0


os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
