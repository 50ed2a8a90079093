"""Model cards: the README and metrics.json written into a checkpoint folder (what `engine models`
and the app show), with the data it was trained on and the command that rebuilds it.

A leaf of lab: `python -m engine eval --write-cards` (lab/evaluate.py) and the PTP
head's `train ptp-eval --write-card` (lab/train_ptp.py) both write cards without importing
each other.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.inputs.domains import CORPUS_DATA, DOMAINS
from engine.samplers import ngram_prior

KIND_TEXT = {
    "asarm": "Any-subset autoregressive model (two-stream, rotary, KV cache): sequential and every ASSD variant.",
    "hybrid": "Self-speculative masked diffusion model (non-causal blocks + one causal block): MDM and self-spec.",
    "judge": "Small left-to-right language model, used only to score samples (judge NLL).",
    "ptp": "Parallel Token Prediction drafter head for `assd-ptp`: turns one AS-ARM call's parallel rows into k "
           "dependent drafts. accept_rows_2_to_k_*: mean 1 - TV(draft row, exact row) of rows 2..k of a round, "
           "i.e. how often the speculative test keeps a draft, for this head and for the AS-ARM's own parallel "
           "rows (what pipelined ASSD drafts).",
}
#: the model card's Data line, per domain and corpus (engine/inputs/domains.py)
DATA_TEXT = {**{n: d.data for n, d in DOMAINS.items()}, **CORPUS_DATA}


def train_command(cfg: dict, state: dict) -> str:
    """The `engine train` command that reproduces a checkpoint, rebuilt from its config and state."""
    kind = state.get("kind", cfg.get("model_type"))
    layers = cfg.get("num_layers", 0) + cfg.get("causal_layers", 0)
    return (f"python -m engine train --kind {kind} --domain {state.get('domain', cfg.get('domain'))} "
            f"--hidden {cfg.get('hidden_size')} --layers {layers} --heads {cfg.get('num_heads')} "
            f"--ffn {cfg.get('intermediate_size')} --seq-len {state.get('seq_len')} --batch {state.get('batch')} "
            f"--steps {state.get('steps')} --lr {state.get('lr')}"
            + (f" --warmup {state['warmup_steps']}" if state.get("warmup_steps") else "")
            + (f" --min-lr {state['min_lr']}" if state.get("min_lr") else "")
            + (f" --corpus {state['corpus']}" if state.get("corpus") not in (None, state.get("domain")) else "")
            + (f" --init {state['init']}" if state.get("init") else "")
            + (f" --teacher {cfg.get('teacher')} --k {cfg.get('k')} --rate-min {cfg.get('rate_min', 0.5)}"
               f" --window {cfg.get('window', 0)}"
               + (f" --ptp-mode onepass --prev-rank {cfg.get('prev_rank', 0)}" if cfg.get("mode") == "onepass" else "")
               + (" --no-output-layer" if cfg.get("output_layer") is False else "")
               if kind == "ptp" else ""))


#: the card's line for a folder that also holds the n-gram drafter's corpus prior
PRIOR_LINE = (f"- Also `{ngram_prior.FILE}`: each token's {ngram_prior.TOP} most frequent followers in the training split "
              f"and the {ngram_prior.CONTEXTS:,} most frequent pairs' top {ngram_prior.TOP3}, the assd-ngram drafter's "
              "corpus prior (engine/samplers/ngram_prior.py); `python -m engine data bigram DOMAIN`.")


def stored_dtype(folder: Path) -> str | None:
    """The dtype the weights file really holds (config.json's `dtype` says what they load as)."""
    from safetensors import safe_open

    files = sorted(f for f in folder.glob("*.safetensors") if f.name != ngram_prior.FILE)  # the weights only
    if not files:
        return None
    with safe_open(str(files[0]), "pt") as f:
        keys = list(f.keys())
        if not keys:
            return None
        name = str(f.get_slice(keys[0]).get_dtype()).lower()
    return {"bf16": "bfloat16", "f32": "float32", "f16": "float16"}.get(name, name)


def write_card(folder: Path, metrics: dict) -> None:
    """metrics.json (read by `engine models` and the app) and a README model card."""
    (folder / "metrics.json").write_text(json.dumps(metrics, indent=2))
    cfg = json.loads((folder / "config.json").read_text())
    state = json.loads((folder / "train_state.json").read_text()) if (folder / "train_state.json").is_file() else {}
    kind = state.get("kind", cfg.get("model_type"))
    lines = [
        f"# {folder.name}", "", KIND_TEXT.get(kind, kind), "",
        f"- Data: {DATA_TEXT.get(state.get('corpus') or state.get('domain', cfg.get('domain')), '?')}",
        f"- Size: {state.get('params', 0) / 1e6:.2f}M trainable parameters; hidden {cfg.get('hidden_size')}, "
        f"context {cfg.get('max_positions', 0) - 1} tokens, vocabulary {cfg.get('vocab_size')}.",
        f"- Training: {state.get('steps')} steps of batch {state.get('batch')} x {state.get('seq_len')} tokens, "
        f"lr {state.get('lr')}, {state.get('minutes', 0):.1f} minutes on {state.get('hardware')} "
        f"({state.get('device')}); final train loss (EMA) {state.get('train_loss_ema', float('nan')):.4f}, "
        f"valid loss {state.get('valid_loss', float('nan')):.4f}.",
        f"- Weights stored in {stored_dtype(folder) or cfg.get('dtype', 'float32')} "
        f"(loaded as {cfg.get('dtype', 'float32')}).",
    ]
    if state.get("provenance"):
        lines.append(f"- Where and how: {state['provenance']}.")
    if (folder / ngram_prior.FILE).is_file():
        lines.append(PRIOR_LINE)
    lines.append(f"- Command: `{train_command(cfg, state)}`")
    lines += ["", "## Measured (`python -m engine eval --write-cards`, held-out test splits, 2-core CPU)", ""]
    lines += [f"- {k}: {v:.4g}" if isinstance(v, float) else f"- {k}: {v}" for k, v in metrics.items()]
    (folder / "README.md").write_text("\n".join(lines) + "\n")
