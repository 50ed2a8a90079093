"""Checkpoints of `python -m engine train`: the saved folder (bf16 weights, tokenizer,
train_state.json with the throughput fields), the validation loss it records, and `compact`.

Why apart from train.py: the loop (train.py) and what a run leaves behind change for different
reasons; the campaign (lab/campaign.py) reads what is written here.
"""

from __future__ import annotations

import json
import math
import platform
import time
from pathlib import Path

import torch

from engine.inputs.tokenization import Codec

from .token_windows import batches


@torch.no_grad()
def valid_loss(model, valid: torch.Tensor, seq_len: int, bos_id: int, n: int = 16) -> float:
    """The training loss on a fixed batch of validation windows (fixed seeds): comparable across steps."""
    gen = torch.Generator().manual_seed(123)
    model.eval()
    ids = next(batches(valid, seq_len, n, gen, bos_id)).to(model.device)
    return float(model.training_loss(ids, 1.0, torch.Generator().manual_seed(7)))


def _speed_state(a) -> dict:
    """The throughput fields of train_state.json: tokens/s of this run, tokens seen in all, the
    optimizer path and the batch probe's measurements."""
    meter, probe = getattr(a, "meter", None), getattr(a, "probe", None)
    if meter is None:
        return {}
    return {"tokens_per_second": round(meter.rate()), "tokens_seen": a.tokens_before + meter.tokens,
            "optimizer": f"AdamW ({a.opt_kind})",
            "batch_probe": None if probe is None else {"chosen": probe.batch, "reason": probe.reason,
                                                       "rows": probe.rows}}


def compact(folder: Path) -> None:
    """Store weights in bfloat16 (half the bytes: bundled checkpoints stay under 20 MB); the
    registry loads them back as float32 for inference."""
    from safetensors.torch import load_file, save_file

    f = Path(folder) / "model.safetensors"
    sd = load_file(str(f))
    save_file({k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in sd.items()}, str(f),
              metadata={"format": "pt"})


def save_checkpoint(model, codec: Codec, out: Path, a, step: int, ema, t0: float, n_params: int, valid,
                    sched=None, opt=None, gen=None, mask_gen=None, resumed: dict | None = None, curve=None) -> None:
    """Write the complete checkpoint folder (what a run cut short still leaves usable) and its
    train_state.json: the run's settings, losses, schedule, hardware and throughput."""
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    compact(out)
    codec.hf.save_pretrained(out)
    if a.save_optimizer and opt is not None:
        torch.save({"model": {k: v.detach().float().cpu() for k, v in model.state_dict().items()},
                    "optimizer": opt.state_dict(), "gen": gen.get_state(), "mask_gen": mask_gen.get_state(),
                    "torch_rng": torch.get_rng_state(), "step": step}, out / "trainer.pt")
    resumed = resumed or {}
    state = {
        "kind": a.kind,
        "domain": a.domain,
        "corpus": getattr(a, "corpus", None) or a.domain,
        "steps": step,
        "train_loss_ema": None if ema is None or math.isnan(float(ema)) else float(ema),
        "valid_loss": valid_loss(model, valid, a.seq_len, codec.bos_id),
        "minutes": resumed.get("minutes", 0.0) + (time.time() - t0) / 60,
        "params": n_params,
        "seq_len": a.seq_len,
        "batch": a.batch,
        "lr": a.lr,
        "lr_final": a.lr * sched.factor(max(0, step - 1)) if sched else None,
        "seed": a.seed,
        "data_chars": a.data_chars,
        **(sched.state() if sched else {}),
        "resumed_from_step": resumed.get("steps") if resumed else None,
        "hardware": f"{platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}",
        "device": str(model.device) + (f" ({torch.cuda.get_device_name(model.device)})"
                                       if model.device.type == "cuda" else ""),
        "precision": getattr(a, "precision", "auto"),
        **_speed_state(a),
    }
    if curve is not None:  # a PTP head's held-out acceptance curve (lab/train_curve.py)
        state.update(curve.state())
    if getattr(a, "init", None):
        state["init"] = str(a.init)
    (out / "train_state.json").write_text(json.dumps(state, indent=2))
    print(f"saved {out} at step {step} (valid loss {state['valid_loss']:.4f})", flush=True)
