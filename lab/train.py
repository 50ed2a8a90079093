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
import random
import time
from pathlib import Path

import torch

from engine.inputs.domains import DOMAINS
from engine.inputs.tokenization import Codec, char_tokenizer, train_bpe
from engine.models import MODEL_KINDS

from .progress import add_quiet_arg, bar, set_quiet
from .token_arrays import TOKENIZERS
from .token_windows import token_stream
from .train_checkpoint import compact, save_checkpoint
from .train_curve import Curve, add_curve_args, check_curve_args
from .train_speed import DeviceWindows, TokenMeter, cuda_memory_ok, device_sync, make_optimizer, probe_batch


def domain_tokenizer(domain: str) -> Codec:
    """The domain's shared tokenizer (AS-ARM, hybrid and judge of a domain must agree)."""
    folder = TOKENIZERS / domain
    if (folder / "tokenizer.json").is_file():
        return Codec.load(folder)
    spec = DOMAINS[domain]  # engine/inputs/domains.py: "chars" (its alphabet) or "bpe" (trained on the corpus)
    if spec.tokenizer == "chars":
        hf = char_tokenizer(spec.alphabet)
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
        hf = train_bpe(sample, spec.bpe_vocab)
    folder.mkdir(parents=True, exist_ok=True)
    hf.save_pretrained(folder)
    return Codec(hf)


class Schedule:
    """Linear warm-up, then a cosine from --lr down to its floor (--min-lr, a fraction of --lr) at
    step `horizon`. The horizon is --steps when given; otherwise it is derived from the time budget:
    after a short warm-up window (`probe` steps, allocation and first-step costs excluded) the
    measured step rate sets horizon = step + rate x remaining time x 0.97, re-estimated 20 times over
    the run from the average rate so far (saves included), so the cosine reaches its floor just as
    --minutes runs out even when the machine gets slower or faster. The warm-up length is fixed at
    the first estimate (min(--warmup, horizon / 10), never shorter than the probe window)."""

    SAFETY = 0.97

    def __init__(self, *, warmup: int, floor: float, horizon: int | None, probe: int = 20):
        self.warmup, self.floor, self.horizon, self.probe = warmup, floor, horizon, probe
        self.fixed = horizon is not None
        self.warm = min(warmup, max(probe, horizon // 10)) if horizon else warmup
        self.next_estimate = probe

    def factor(self, step: int) -> float:
        """Learning-rate multiplier at a step: linear warm-up, then cosine decay to the floor."""
        h = self.horizon or 1 << 62
        cos = 0.5 * (1 + math.cos(math.pi * min(1.0, step / max(1, h))))
        return min(1.0, (step + 1) / max(1, self.warm)) * (self.floor + (1 - self.floor) * cos)

    def update(self, step: int, rate_steps: int, rate_seconds: float, remaining_s: float) -> None:
        """Re-derive the horizon from a measured rate (steps per second over rate_seconds)."""
        if self.fixed or step < self.next_estimate or rate_seconds <= 0:
            return
        first = self.horizon is None
        self.horizon = step + max(1, int(rate_steps / rate_seconds * max(0.0, remaining_s) * self.SAFETY))
        if first:
            self.warm = min(self.warmup, max(self.probe, self.horizon // 10))
        self.next_estimate = step + max(1, self.horizon // 20)

    def done(self, step: int) -> bool:
        """True once the horizon (fixed or derived from the time budget) is reached."""
        return self.horizon is not None and step >= self.horizon

    def state(self) -> dict:
        """The schedule as train_state.json records it."""
        return {"horizon": self.horizon, "warmup_steps": self.warm, "min_lr": self.floor,
                "horizon_from": "--steps" if self.fixed else "time budget"}


def precision(device: torch.device, choice: str = "auto") -> tuple[torch.dtype | None, bool]:
    """(autocast dtype or None, TF32 on?): bf16 autocast and TF32 matmuls where a GPU trains; the
    CPU keeps float32 unless --precision bf16 asks for CPU autocast."""
    on_gpu = device.type == "cuda"
    if choice == "fp32":
        return None, False
    if choice == "bf16":
        return torch.bfloat16, on_gpu
    return (torch.bfloat16 if on_gpu else None), on_gpu


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine train")
    ap.add_argument("--kind", choices=sorted(MODEL_KINDS), default=None, help="required unless --resume")
    ap.add_argument("--domain", choices=list(DOMAINS), default=None,
                    help="required unless --resume; chars: text8-style letters and space (an experiment)")
    ap.add_argument("--corpus", default=None, choices=["modern"],
                    help="train on this corpus instead of the domain's own (modern: the CPU fine-tuning "
                         "experiment of text models; lab/experiment_corpora.py)")
    ap.add_argument("--out", default=None, help="checkpoint folder (default: the --resume folder)")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--ffn", type=int, default=768)
    ap.add_argument("--causal-layers", type=int, default=1, help="hybrid: causal blocks on top")
    ap.add_argument("--backbone", default=None,
                    help="hybrid: a local Hugging Face masked-LM folder (BERT / RoBERTa / ESM family, with its "
                         "tokenizer.json) used frozen as the non-causal stack; only the causal block trains")
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=batch_arg, default=16,
                    help="sequences a step, or auto: a short probe at the start picks it (largest that fits "
                         "under --max-batch-tokens, the smallest of those within 10%% of the best tokens/s)")
    ap.add_argument("--max-batch-tokens", type=int, default=131_072, help="--batch auto: tokens-per-step cap")
    ap.add_argument("--probe-seconds", type=float, default=30.0,
                    help="--batch auto: the probe's time budget (at most a tenth of --minutes)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr", type=float, default=0.0, help="the cosine's floor, as a fraction of --lr")
    ap.add_argument("--warmup", type=int, default=200, help="linear warm-up steps (at most a tenth of the schedule)")
    ap.add_argument("--steps", type=int, default=None,
                    help="schedule length; default: derived from --minutes and the measured step rate")
    ap.add_argument("--minutes", type=float, default=30.0, help="wall-time budget (the run stops when it is spent)")
    ap.add_argument("--probe-steps", type=int, default=20, help="steps timed before the first horizon estimate")
    ap.add_argument("--save-minutes", type=float, default=5.0)
    ap.add_argument("--save-optimizer", action="store_true",
                    help="also write trainer.pt (float32 weights, AdamW moments, random states) so --resume "
                         "continues exactly; not for bundled checkpoints (several times the weights' size)")
    ap.add_argument("--resume", default=None,
                    help="continue from a checkpoint folder this command saved: its weights (float32 ones and "
                         "the optimizer when it has trainer.pt), step count and schedule; --steps sets a new horizon")
    ap.add_argument("--device", default=None, help="auto (CUDA when available), cpu or cuda; default $INFILL_DEVICE")
    ap.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto",
                    help="auto: bf16 autocast + TF32 on a GPU, float32 on the CPU")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: leave default)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-chars", type=int, default=40_000_000, help="read at most this much training text")
    ap.add_argument("--init", default=None, metavar="DIR",
                    help="fine-tune: start from the weights and config of this checkpoint folder (the size flags "
                         "are ignored; optimizer and schedule start fresh). ptp: the head is built from the size "
                         "flags and takes the folder's weights that fit, with a warning for the rest")
    ap.add_argument("--teacher", default=None, help="ptp: the frozen AS-ARM (folder or bundled name) to distil")
    ap.add_argument("--k", type=int, default=5, help="ptp: draft rows per round it learns")
    ap.add_argument("--rate-min", type=float, default=0.5,
                    help="ptp: training mask rate ~ U(rate-min, 1) per sequence (the benchmark masks 0.95)")
    ap.add_argument("--window", type=int, default=0,
                    help="ptp: the head also reads this many known tokens just left of each round")
    ap.add_argument("--ptp-mode", choices=["draft", "onepass"], default="draft",
                    help="ptp: draft = row j reads the previous draft (k head steps a round); onepass = row j "
                         "reads u_{j-1} (one head pass a round)")
    ap.add_argument("--prev-rank", type=int, default=0,
                    help="ptp onepass: rank of the per-row low-rank logit term on the real previous draft (0: none)")
    ap.add_argument("--no-output-layer", action="store_true",
                    help="ptp onepass with --prev-rank: no [V, d] output layer; a row's residual is the low-rank term alone "
                         "(cheaper to draft with on a CPU)")
    ap.add_argument("--prev-init", choices=["zero", "bigram"], default="zero",
                    help="ptp onepass: start that term at zero or at the training corpus's bigram PMI (rank --prev-rank)")
    add_curve_args(ap)
    add_quiet_arg(ap)
    return ap


def batch_arg(s: str) -> int | str:
    """--batch: a whole number of sequences, or auto (the probe's choice)."""
    if s == "auto":
        return s
    try:
        return int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or auto, got {s!r}") from None


RESUMED_ARGS = ("kind", "domain", "corpus", "seq_len", "batch", "lr", "min_lr", "warmup", "seed", "data_chars")


def cli(argv: list[str]) -> int:
    """`python -m engine train`: train a model (or `compact` / `ptp-eval` a trained one)."""
    if argv[:1] == ["compact"]:  # python -m engine train compact FOLDER...
        for folder in argv[1:]:
            compact(Path(folder))
        return 0
    if argv[:1] == ["ptp-eval"]:  # python -m engine train ptp-eval FOLDER: a PTP drafter's card numbers
        from .train_ptp import eval_cli

        return eval_cli(argv[1:])
    ap = _parser()
    a = ap.parse_args(argv)
    resumed: dict = {}
    if a.resume:  # the saved run's settings become the defaults; flags given now still win
        folder = Path(a.resume)
        if not (folder / "train_state.json").is_file():
            ap.error(f"--resume {folder}: no train_state.json (not a folder saved by python -m engine train)")
        resumed = json.loads((folder / "train_state.json").read_text())
        ap.set_defaults(**{k: resumed[k] for k in RESUMED_ARGS if k in resumed}, out=str(folder))
        a = ap.parse_args(argv)
    if not (a.kind and a.domain and a.out):
        ap.error("--kind, --domain and --out are required (unless --resume gives them)")
    if a.resume and a.init:
        ap.error("--resume continues a run; --init starts a new one from a checkpoint's weights: give one")
    check_curve_args(a, ap)
    set_quiet(a.quiet)

    from accelerate import Accelerator

    from engine.loading.device import apply_device_flag
    from engine.loading.threads import set_threads

    device = apply_device_flag(a.device)
    autocast_dtype, tf32 = precision(device, a.precision)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)  # accelerate trains on the current CUDA device
    if tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    set_threads(a.threads or torch.get_num_threads())  # the sampling default (1) never applies here
    torch.manual_seed(a.seed)
    acc = Accelerator(cpu=device.type == "cpu")
    trainer_state = None
    if a.resume:
        codec = Codec.load(a.resume)
        model = _resume_model(Path(a.resume), a)
        if (Path(a.resume) / "trainer.pt").is_file():
            trainer_state = torch.load(Path(a.resume) / "trainer.pt", map_location="cpu", weights_only=False)
            model.load_state_dict(trainer_state["model"])
    elif a.backbone:
        codec, model = _backbone_hybrid(a, ap)
    elif a.kind == "ptp":
        from .train_ptp import drafter_for_training

        codec, model = drafter_for_training(a, ap)
    elif a.init:
        codec, model = _init_from(a, ap)
    else:
        codec = domain_tokenizer(a.domain)
        cfg_cls, model_cls = MODEL_KINDS[a.kind]
        model = model_cls(cfg_cls.for_training(a, codec))
    n_params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    corpus = getattr(a, "corpus", None) or a.domain
    train = token_stream(corpus, "train", codec, a.data_chars)
    valid = token_stream(corpus, "valid", codec, 400_000)
    acc.print(f"{a.kind}/{a.domain}: {n_params / 1e6:.2f}M trainable params, {len(train):,} train tokens, "
              f"{acc.device}, autocast {autocast_dtype or 'off'}, TF32 {'on' if tf32 else 'off'}")
    model.to(acc.device)  # before the optimizer: fused AdamW needs the parameters on their device
    opt, opt_kind = make_optimizer([p for p in model.parameters() if p.requires_grad], a.lr)
    step = int(resumed.get("steps", 0))
    horizon = a.steps if a.steps is not None else resumed.get("horizon")
    sched = Schedule(warmup=a.warmup, floor=a.min_lr, horizon=horizon, probe=a.probe_steps)
    if "warmup_steps" in resumed and a.steps is None:
        sched.warm = resumed["warmup_steps"]
    model, opt = acc.prepare(model, opt)
    windows = DeviceWindows(
        stream=train, seq_len=a.seq_len, bos_id=codec.bos_id, device=acc.device, seed=a.seed + step
    )  # moved once
    gen = windows.gen
    # the masks are drawn on the device too, except by the PTP head (its rounds are built on the host)
    mask_gen = torch.Generator(device=acc.device if a.kind != "ptp" else "cpu").manual_seed(a.seed + 1 + step)
    if trainer_state is not None:
        opt.load_state_dict(trainer_state["optimizer"])
        gen.set_state(trainer_state["gen"])
        mask_gen.set_state(trainer_state["mask_gen"])
        torch.set_rng_state(trainer_state["torch_rng"])
    out = Path(a.out)
    t0 = last_save = time.time()
    budget = a.minutes * 60
    rate_from: tuple[int, float] | None = None  # (step, time) where the rate measurement starts
    ema0 = resumed.get("train_loss_ema") if trainer_state is not None else None
    ema = torch.tensor(ema0 if ema0 is not None else float("nan"), device=acc.device)  # no sync a step
    base = acc.unwrap_model(model)
    probe = None
    if a.batch == "auto":
        probe = _probe(a, base, opt, windows, device, autocast_dtype, acc)
        a.batch = probe.batch
    data = windows.batches(a.batch)
    meter = TokenMeter()
    a.opt_kind, a.probe, a.meter, a.tokens_before = opt_kind, probe, meter, int(resumed.get("tokens_seen", 0))
    acc.print(f"optimizer AdamW ({opt_kind}), batch {a.batch} x {a.seq_len} tokens, windows built on {windows.device}")
    # the bar's total is the schedule's horizon (re-estimated from the step rate when --steps is not
    # given), so its time left is the schedule's; the --minutes budget left is shown beside it
    pbar = bar(total=sched.horizon or None, desc=f"train {a.kind}/{a.domain}", unit="step")
    pbar.update(step)
    curve = (
        None
        if not a.curve_every
        else Curve(
            head=base,
            valid=valid,
            seq_len=a.seq_len,
            bos_id=codec.bos_id,
            every=a.curve_every,
            windows=a.curve_windows,
            stop=a.stop_when_flat,
            min_points=a.stop_min_points,
            prior=resumed.get("acceptance_curve"),
        )
    )
    ran_s = 60 * resumed.get("minutes", 0.0)  # a --resume'd run's curve goes on from its seconds
    if curve:  # the starting point: the initialisation's (or the resumed weights') acceptance
        curve.measure(step, a.tokens_before, time.time() - t0, ran_s, a.lr * sched.factor(step))
    while not sched.done(step) and time.time() - t0 < budget:
        model.train()
        for g in opt.param_groups:
            g["lr"] = a.lr * sched.factor(step)
        ids = next(data)
        progress = min(1.0, step / sched.horizon) if sched.horizon else 0.0  # the models' mask curricula
        with torch.autocast(device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
            loss = base.training_loss(ids, progress, mask_gen)
        acc.backward(loss)
        acc.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        step += 1
        ema = torch.where(ema.isnan(), loss.detach().float(), 0.98 * ema + 0.02 * loss.detach().float())
        now = time.time()
        meter.add(a.batch * a.seq_len, now)
        if rate_from is None and step - int(resumed.get("steps", 0)) >= 3:  # first steps allocate: not timed
            rate_from = (step, now)
        if rate_from is not None:
            sched.update(step, step - rate_from[0], now - rate_from[1], budget - (now - t0))
        pbar.update(1)
        if step % 10 == 0 and not pbar.disable:
            if sched.horizon and pbar.total != sched.horizon:
                pbar.total = sched.horizon
            pbar.set_postfix(loss=f"{float(ema):.4f}", lr=f"{opt.param_groups[0]['lr']:.3g}",
                             tok_s=f"{meter.rate():,.0f}",
                             budget_left=f"{max(0.0, budget - (now - t0)):.0f}s", refresh=False)
        if step % 50 == 0 and pbar.disable:  # a log line when there is no bar (not a terminal, --quiet)
            acc.print(f"step {step} loss {float(ema):.4f} lr {opt.param_groups[0]['lr']:.3g} "
                      f"horizon {sched.horizon} tokens/s {meter.rate():,.0f} ({now - t0:.0f}s)")
        if curve and curve.due(step, now - t0):
            curve.measure(step, a.tokens_before + meter.tokens, now - t0, ran_s, opt.param_groups[0]["lr"])
            if curve.flat_now():
                break
        if now - last_save > a.save_minutes * 60:
            save_checkpoint(base, codec, out, a, step, ema, t0, n_params, valid, sched, opt, gen, mask_gen, resumed,
                            curve)
            last_save = time.time()
    pbar.close()
    if curve and curve.points[-1]["step"] != step:  # the end point (the run's last weights)
        curve.measure(step, a.tokens_before + meter.tokens, time.time() - t0, ran_s, opt.param_groups[0]["lr"])
    acc.print(f"trained {meter.tokens:,} tokens in {time.time() - t0:.0f}s: {meter.rate():,.0f} tokens/s")
    save_checkpoint(base, codec, out, a, step, ema, t0, n_params, valid, sched, opt, gen, mask_gen, resumed,
                    curve)
    return 0


def _probe(a, base, opt, windows: DeviceWindows, device: torch.device, autocast_dtype, acc):
    """--batch auto: time forward + backward of doubling batches (no optimizer step: the weights
    stay as they are; its own generators: the run's random stream is untouched)."""
    pgen = torch.Generator(device=windows.device).manual_seed(10_007)
    mgen = torch.Generator(device=windows.device if a.kind != "ptp" else "cpu").manual_seed(10_009)
    base.train()

    def step(b: int) -> None:
        with torch.autocast(device.type, dtype=autocast_dtype or torch.float32, enabled=autocast_dtype is not None):
            loss = base.training_loss(windows.take(b, pgen), 1.0, mgen)  # full mask rate: the most memory
        acc.backward(loss)
        opt.zero_grad(set_to_none=True)

    budget_s = min(a.probe_seconds, 0.1 * a.minutes * 60)  # the probe never eats the run (it counts in --minutes)
    return probe_batch(step, a.seq_len + 1, a.max_batch_tokens, budget_s=budget_s,
                       sync=device_sync(device), memory_ok=cuda_memory_ok(device), log=acc.print)


def _init_from(a, ap: argparse.ArgumentParser):
    """(codec, model) for --init: a checkpoint of the same kind and domain, in float32, its tokenizer
    the domain's (so the fine-tuned model still pairs with the domain's other models)."""
    from transformers import AutoModel

    folder = Path(a.init)
    if not (folder / "config.json").is_file():
        ap.error(f"--init {folder}: expected a checkpoint folder with config.json")
    cfg = json.loads((folder / "config.json").read_text())
    if cfg.get("model_type") != a.kind or cfg.get("domain", "text") != a.domain:
        ap.error(f"--init {folder} is a {cfg.get('model_type')} model for {cfg.get('domain')}, not {a.kind}/{a.domain}")
    codec = domain_tokenizer(a.domain)
    if Codec.load(folder).hf.get_vocab() != codec.hf.get_vocab():
        ap.error(f"--init {folder}: its tokenizer differs from assets/tokenizers/{a.domain}")
    model = AutoModel.from_pretrained(str(folder), dtype=torch.float32)
    if a.seq_len + 1 > model.config.max_positions:
        ap.error(f"--seq-len {a.seq_len} exceeds the checkpoint's {model.config.max_positions - 1} positions")
    return codec, model


def _resume_model(folder: Path, a):
    """The saved model in float32 (the bundled safetensors hold bfloat16 copies)."""
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(str(folder))
    if cfg.model_type != a.kind or a.kind not in MODEL_KINDS:
        raise SystemExit(f"error: --resume {folder} holds a {cfg.model_type} model, not {a.kind}")
    model = MODEL_KINDS[a.kind][1].from_pretrained(str(folder), dtype=torch.float32)
    if a.kind == "ptp":  # the frozen AS-ARM it distils from is not part of the checkpoint
        from engine.loading.registry import load

        model.attach_teacher(load(a.teacher or cfg.teacher).model)
    return model


def _backbone_hybrid(a, ap: argparse.ArgumentParser):
    """(codec, hybrid) for --backbone: the backbone's own tokenizer, a frozen non-causal stack."""
    from engine.models.hybrid import HybridModel

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
