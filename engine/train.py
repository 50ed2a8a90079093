"""`python -m engine train`: one training loop for every model kind, on `accelerate`.

Each model class owns its loss (`training_loss(ids, progress, gen)`: it samples its own masks);
this module owns data, schedule, checkpoints and bookkeeping. Checkpoints are written to --out
every --save-minutes as a complete `save_pretrained` folder (weights, config, tokenizer,
train_state.json), so a run cut short still leaves a usable model.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import time
from pathlib import Path

import torch

from .models import MODEL_KINDS
from .tokenization import PROTEIN_ALPHABET, Codec, char_tokenizer, train_bpe

TOKENIZERS = Path(__file__).resolve().parent.parent / "assets" / "tokenizers"
BPE_VOCAB = {"text": 4096, "code": 4096}


def domain_tokenizer(domain: str) -> Codec:
    """The domain's shared tokenizer (AS-ARM, hybrid and judge of a domain must agree)."""
    folder = TOKENIZERS / domain
    if (folder / "tokenizer.json").is_file():
        return Codec.load(folder)
    if domain == "protein":
        hf = char_tokenizer(PROTEIN_ALPHABET)
    else:
        from .data import load_split

        docs = load_split(domain, "train")
        random.Random(0).shuffle(docs)
        sample, size = [], 0
        for d in docs:  # ~8 MB is plenty for a 4k vocabulary
            sample.append(d)
            size += len(d)
            if size > 8_000_000:
                break
        hf = train_bpe(sample, BPE_VOCAB[domain])
    folder.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(folder)
    return Codec(hf)


def token_stream(domain: str, split: str, codec: Codec, limit_chars: int | None = None) -> torch.Tensor:
    """All documents of a split, tokenized and concatenated (a blank line between prose or code
    documents; proteins are simply abutted). Special tokens never appear as targets."""
    from .data import load_split

    sep = [] if domain == "protein" else codec.encode("\n\n")
    ids: list[int] = []
    total = 0
    for doc in load_split(domain, split):
        ids.extend(codec.encode(doc))
        ids.extend(sep)
        total += len(doc)
        if limit_chars and total > limit_chars:
            break
    return torch.tensor(ids, dtype=torch.long)


def batches(stream: torch.Tensor, seq_len: int, batch: int, gen: torch.Generator, bos_id: int = 1):
    """Random windows of seq_len tokens, with BOS prepended at model position 0."""
    while True:
        starts = torch.randint(0, len(stream) - seq_len - 1, (batch,), generator=gen)
        x = torch.stack([stream[s : s + seq_len] for s in starts])
        bos = torch.full((batch, 1), bos_id, dtype=torch.long)
        yield torch.cat([bos, x], 1)


def cli(argv: list[str]) -> int:
    if argv[:1] == ["compact"]:  # python -m engine train compact FOLDER...
        for folder in argv[1:]:
            compact(Path(folder))
        return 0
    ap = argparse.ArgumentParser(prog="python -m engine train")
    ap.add_argument("--kind", choices=sorted(MODEL_KINDS), required=True)
    ap.add_argument("--domain", choices=["text", "code", "protein"], required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--causal-layers", type=int, default=1, help="hybrid: causal blocks on top")
    ap.add_argument("--backbone", default=None,
                    help="hybrid: a local Hugging Face masked-LM folder (BERT / RoBERTa / ESM family, with its "
                         "tokenizer.json) used frozen as the non-causal stack; only the causal block trains")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--minutes", type=float, default=30.0, help="stop after this much wall time")
    ap.add_argument("--save-minutes", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-chars", type=int, default=40_000_000, help="read at most this much training text")
    a = ap.parse_args(argv)

    from accelerate import Accelerator

    from .registry import set_threads

    set_threads(a.threads or torch.get_num_threads())  # the sampling default (1) never applies here
    torch.manual_seed(a.seed)
    acc = Accelerator()
    if a.backbone:
        codec, model = _backbone_hybrid(a, ap)
    else:
        codec = domain_tokenizer(a.domain)
        cfg_cls, model_cls = MODEL_KINDS[a.kind]
        model = model_cls(cfg_cls.for_training(a, codec))
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    train = token_stream(a.domain, "train", codec, a.data_chars)
    valid = token_stream(a.domain, "valid", codec, 400_000)
    acc.print(f"{a.kind}/{a.domain}: {n_params / 1e6:.2f}M trainable params, {len(train):,} train tokens")
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=a.lr, weight_decay=0.01)
    warm = 200
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / a.steps)))
    )
    model, opt, sched = acc.prepare(model, opt, sched)
    gen = torch.Generator().manual_seed(a.seed)
    mask_gen = torch.Generator().manual_seed(a.seed + 1)
    out = Path(a.out)
    t0 = last_save = time.time()
    ema, step = None, 0
    data = batches(train, a.seq_len, a.batch, gen, codec.bos_id)
    while step < a.steps and time.time() - t0 < a.minutes * 60:
        model.train()
        ids = next(data).to(acc.device)
        progress = min(1.0, step / max(1, a.steps))
        loss = acc.unwrap_model(model).training_loss(ids, progress, mask_gen)
        acc.backward(loss)
        acc.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        step += 1
        ema = loss.item() if ema is None else 0.98 * ema + 0.02 * loss.item()
        if step % 50 == 0:
            acc.print(f"step {step} loss {ema:.4f} ({time.time() - t0:.0f}s)")
        if time.time() - last_save > a.save_minutes * 60:
            _save(acc.unwrap_model(model), codec, out, a, step, ema, t0, n_params, valid)
            last_save = time.time()
    _save(acc.unwrap_model(model), codec, out, a, step, ema, t0, n_params, valid)
    return 0


def _backbone_hybrid(a, ap: argparse.ArgumentParser):
    """(codec, hybrid) for --backbone: the backbone's own tokenizer, a frozen non-causal stack."""
    from .models.hybrid import HybridModel

    if a.kind != "hybrid":
        ap.error("--backbone needs --kind hybrid")
    folder = Path(a.backbone)
    if not (folder / "config.json").is_file() or not (folder / "tokenizer.json").is_file():
        ap.error(f"--backbone {folder}: expected a save_pretrained folder with config.json and tokenizer.json")
    codec = Codec.load(folder)
    model = HybridModel.from_backbone(
        folder, causal_layers=a.causal_layers, hidden_size=a.hidden, num_heads=a.heads, intermediate_size=a.ffn,
        domain=a.domain, special_token_ids=codec.special_ids, bos_token_id=codec.bos_id,
        mask_token_id=codec.mask_id, pad_token_id=codec.pad_id)
    if a.seq_len + 1 > model.config.max_positions:
        ap.error(f"--seq-len {a.seq_len} exceeds the backbone's {model.config.max_positions - 1} positions")
    return codec, model


@torch.no_grad()
def valid_loss(model, valid: torch.Tensor, seq_len: int, bos_id: int, n: int = 16) -> float:
    gen = torch.Generator().manual_seed(123)
    model.eval()
    ids = next(batches(valid, seq_len, n, gen, bos_id)).to(model.device)
    return float(model.training_loss(ids, 1.0, torch.Generator().manual_seed(7)))


def compact(folder: Path) -> None:
    """Store weights in bfloat16 (half the bytes: bundled checkpoints stay under 20 MB); the
    registry loads them back as float32 for inference."""
    from safetensors.torch import load_file, save_file

    f = Path(folder) / "model.safetensors"
    sd = load_file(str(f))
    save_file({k: v.to(torch.bfloat16) if v.is_floating_point() else v for k, v in sd.items()}, str(f),
              metadata={"format": "pt"})


def _save(model, codec: Codec, out: Path, a, step: int, ema, t0: float, n_params: int, valid) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    compact(out)
    codec.hf.save_pretrained(out)
    state = {
        "kind": a.kind,
        "domain": a.domain,
        "steps": step,
        "train_loss_ema": ema,
        "valid_loss": valid_loss(model, valid, a.seq_len, codec.bos_id),
        "minutes": (time.time() - t0) / 60,
        "params": n_params,
        "seq_len": a.seq_len,
        "batch": a.batch,
        "lr": a.lr,
        "hardware": f"{platform.processor() or platform.machine()}, torch threads {torch.get_num_threads()}",
        "device": str(model.device),
    }
    (out / "train_state.json").write_text(json.dumps(state, indent=2))
    print(f"saved {out} at step {step} (valid loss {state['valid_loss']:.4f})", flush=True)
