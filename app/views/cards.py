"""The model card shown next to the editor: size, training budget and measured quality of the model
a run will use, read from the checkpoint folder (config.json, train_state.json, metrics.json), plus
one plain sentence when the measured quality is low, so nobody mistakes a demo model's nonsense for
the sampler's fault. Read generically: unknown metric keys are listed as they are, never dropped."""

from __future__ import annotations

import json
from pathlib import Path

from app.views.render import esc
from engine.errors import ModelNotFoundError
from engine.inputs.domains import DOMAINS as REGISTRY
from engine.loading import folders as model_folders
from engine.loading import registry
from engine.loading.hub import hub_options, is_hub_spec

KIND_NAMES = {
    "asarm": "any-subset autoregressive (AS-ARM), used by sequential and the ASSD samplers",
    "hybrid": "self-speculative masked diffusion (hybrid), used by MDM and self-spec",
    "judge": "left-to-right judge model",
}

#: metric key -> (label, format); keys not listed here are shown as "key: value"
METRIC_LABELS: dict[str, tuple[str, str]] = {
    "ppl_left_to_right": ("perplexity, left to right", "{:.1f}"),
    "ppl_95_masked_noncausal": ("perplexity with 95% masked (non-causal)", "{:.1f}"),
    "ppl_vs_unigram": ("perplexity relative to letter frequencies alone", "{:.3f}x"),
    "unigram_ppl": ("perplexity of letter frequencies alone", "{:.1f}"),
    "spelling_accuracy_95": ("words in its fills that are real words (95% masked)", "{:.0%}"),
    "humaneval_single_line_pass1": ("HumanEval single-line pass@1", "{:.1%}"),
    "humaneval_tokens_per_call": ("HumanEval tokens per call", "{:.2f}"),
}
#: keys that only qualify another figure (counts, sampler names, seconds)
QUIET = ("test_tokens", "spelling_inputs", "spelling_spans", "spelling_sampler", "humaneval_tasks",
         "humaneval_calls_mean", "humaneval_sampler", "humaneval_seconds")


def _json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def card_data(name: str) -> dict | None:
    """What the card shows for the model `name` (None when no listed checkpoint has that name)."""
    try:
        path = registry.resolve(name, allow_paths=False)
    except Exception:  # noqa: BLE001 - an unknown or broken folder just has no card
        return None
    path = Path(path)
    cfg, state, metrics = _json(path / "config.json"), _json(path / "train_state.json"), _json(path / "metrics.json")
    kind = state.get("kind") or model_folders.KIND_BY_TYPE.get(cfg.get("model_type", ""), cfg.get("model_type", "?"))
    return {"name": name, "kind": kind, "domain": state.get("domain") or cfg.get("domain", "?"),
            "config": cfg, "train": state, "metrics": metrics, "has_readme": (path / "README.md").is_file()}


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _millions(n) -> str:
    n = _num(n)
    return "?" if n is None else (f"{n / 1e6:.1f}M" if n >= 1e5 else f"{n:,.0f}")


def quality_verdict(data: dict) -> str:
    """One plain sentence when the measured quality is low ('' when it looks usable or is unknown)."""
    m = data.get("metrics", {})
    domain = data.get("domain")
    low = []
    rel = _num(m.get("ppl_vs_unigram"))
    if rel is not None and rel > 0.9:
        low.append("it predicts residues no better than their overall frequencies do")
    pass1 = _num(m.get("humaneval_single_line_pass1"))
    if pass1 is not None and pass1 < 0.2:
        low.append(f"it completes only {pass1:.1%} of single code lines correctly")
    spell = _num(m.get("spelling_accuracy_95"))
    if spell is not None and spell < 0.9:
        low.append(f"about {1 - spell:.0%} of the words it writes are not real words")
    ppl = next((_num(v) for k, v in m.items() if k.startswith("ppl_") and k != "ppl_vs_unigram"
                and _num(v) is not None), None)
    fluent = REGISTRY[domain].fluent_ppl if domain in REGISTRY else None  # engine/inputs/domains.py
    if ppl is not None and fluent is not None and ppl > fluent:
        low.append(f"its perplexity is {ppl:.0f} (fluent models score well under 20)")
    if not low:
        return ""
    return ("Low quality: this is a small demonstration model, and " + "; ".join(low)
            + ". Expect fills that look like the domain but rarely make sense: use it to watch how the "
            "samplers decide, not for the content.")


def hub_options_line(name: str) -> str:
    """A Hub checkpoint's per-model options in words (engine/loading/hub.py: HubOptions): the ASSD
    authors' code spelling and the special-token rule; '' for anything else."""
    if not is_hub_spec(name) or Path(name).is_dir() or name in model_folders.listed_folders():
        return ""  # a bundled or operator folder is no Hub checkpoint (a bare name looks like one)
    try:
        o = hub_options(name)
    except ModelNotFoundError:  # a bad INFILL_HUB_OPTIONS: loading says so
        return ""
    code = ("on (whitespace spelled as the ASSD authors spell it: newline <cls>, tab <sep>, two spaces <unk>)"
            if o.code_map else "off")
    rule = ("on: no fill takes a special token" if o.exclude_special
            else "off: only <mask> is removed, the ASSD authors' law")
    return (f"Options: code spelling {code}; special tokens excluded from fills {rule} (INFILL_HUB_OPTIONS "
            "\"exclude_special\", --exclude-special). An XLNet is fed without <s>, as its authors feed it "
            "(only a window with nothing visible gets one, so the first question has a key to attend to).")


def card_markdown(name: str | None) -> str:
    """The card as Markdown (every value from the folder escaped)."""
    if not name:
        return ""
    data = card_data(name)
    if data is None:
        return f"**Model card:** no card for {esc(name)}."
    cfg, st, m = data["config"], data["train"], data["metrics"]
    parts = [f"**Model card: {esc(name)}**, {esc(KIND_NAMES.get(data['kind'], data['kind']))}."]
    size = [f"{_millions(st.get('params'))} parameters" if st.get("params") is not None else ""]
    ctx = st.get("seq_len") or cfg.get("max_positions")
    if ctx:
        size.append(f"context {esc(ctx)} tokens")
    if cfg.get("vocab_size"):
        size.append(f"vocabulary {esc(cfg['vocab_size'])}")
    size = [s for s in size if s]
    if size:
        parts.append("Size: " + ", ".join(size) + ".")
    if st:
        bits = []
        steps, batch, seq = _num(st.get("steps")), _num(st.get("batch")), _num(st.get("seq_len"))
        if steps is not None:
            b = f"{steps:,.0f} steps"
            if batch and seq:
                b += f" of {batch:g} x {seq:g} tokens (about {steps * batch * seq / 1e6:,.0f}M tokens)"
            bits.append(b)
        if _num(st.get("minutes")) is not None:
            dev = str(st.get("device") or "")
            where = "a GPU" if dev.startswith("cuda") else (dev or str(st.get("hardware") or "?"))
            bits.append(f"{st['minutes']:.0f} minutes on {esc(where)}")
        if _num(st.get("valid_loss")) is not None:
            bits.append(f"validation loss {st['valid_loss']:.2f}")
        if bits:
            parts.append("Training: " + ", ".join(bits) + ".")
    else:
        parts.append("Training: not recorded (no train_state.json).")
    shown = []
    for key, v in m.items():
        if key in QUIET or key.startswith("nll_"):  # the perplexity beside it says the same
            continue
        label, fmt = METRIC_LABELS.get(key, (key, "{:.3g}" if _num(v) is not None else "{}"))
        try:
            val = fmt.format(v)
        except (TypeError, ValueError):
            val = str(v)
        shown.append(f"{esc(label)} {esc(val)}")
    if shown:
        n = m.get("test_tokens")
        parts.append("Measured" + (f" on {esc(n)} held-out tokens" if n else "") + ": " + "; ".join(shown) + ".")
    else:
        parts.append("Measured quality: none recorded (no metrics.json).")
    opts = hub_options_line(name)
    if opts:
        parts.append(esc(opts))
    verdict = quality_verdict(data)
    text = " ".join(parts)
    return text + (f"\n\n⚠️ {esc(verdict)}" if verdict else "")
