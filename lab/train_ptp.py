"""Training and model-card evaluation of the PTP drafter (engine/models/ptp.py): tooling, not runtime.

`python -m engine train --kind ptp --teacher DIR` builds the head here; `python -m engine train
ptp-eval FOLDER` measures the acceptance the card reports.
"""

from __future__ import annotations

from pathlib import Path

import torch

from engine.models.ptp import PtpConfig, PtpHead


def drafter_for_training(a, ap) -> tuple:
    """(codec, head with its teacher attached) for `python -m engine train --kind ptp --teacher DIR`."""
    from engine.loading.registry import load

    if not a.teacher:
        ap.error("--kind ptp needs --teacher (an AS-ARM checkpoint folder or bundled name)")
    lm = load(a.teacher)
    if lm.kind != "asarm" or lm.model_type != "asarm":
        ap.error(f"--teacher {a.teacher}: expected a native AS-ARM, got a {lm.model_type} model")
    if a.seq_len + 1 > lm.model.config.max_positions:
        ap.error(f"--seq-len {a.seq_len} exceeds the teacher's {lm.model.config.max_positions - 1} positions")
    a.teacher = str(lm.path)
    head = PtpHead(PtpConfig.for_teacher(lm.model.config, a))
    with torch.no_grad():  # start from the teacher's token embeddings
        head.tok_embed.weight.copy_(lm.model.embed.weight.float())
    if getattr(a, "init", None):  # warm start (e.g. a one-pass head from a draft-mode one): shared weights copied
        warm_start(head, a.init)
    if getattr(a, "prev_init", None) == "bigram":
        if not head.config.prev_rank:
            ap.error("--prev-init bigram needs --ptp-mode onepass --prev-rank R")
        from .token_windows import token_stream

        bigram_init(head, token_stream(a.domain, "train", lm.codec, min(a.data_chars, 20_000_000)))
    head.attach_teacher(lm.model)
    return lm.codec, head


@torch.no_grad()
def bigram_init(head: PtpHead, stream: torch.Tensor, scale: float = 0.8, smooth: float = 0.1) -> None:
    """Start the one-pass head's low-rank term on d_{j-1} as the corpus's bigram PMI,
    log p(t | d) - log p(t), at rank prev_rank (truncated SVD) and `scale` (0.8 measured best on
    held-out text rows: base + 0.8 PMI accepts 0.35-0.37 against 0.29 for the base rows alone), with
    the gate at 1: a few hundred CPU steps then refine a sensible term instead of growing one from zero."""
    v, r = head.config.vocab_size, head.config.prev_rank
    counts = torch.bincount(stream[:-1] * v + stream[1:], minlength=v * v).view(v, v).float()
    uni = torch.bincount(stream, minlength=v).float() + 1
    pmi = torch.log((counts + smooth) / (counts.sum(1, keepdim=True) + smooth * v)) - torch.log(uni / uni.sum())[None]
    # randomised SVD, oversampled (q = r + 8, the usual margin): at q = r its top directions depend on the
    # random start (a rank-3 term of a 7-token vocabulary missed its one bigram from 4 of 200 starts)
    u, sv, w = torch.svd_lowrank(pmi, q=min(v, r + 8), niter=3)
    root = (sv[:r] * scale).sqrt()
    head.prev_in.weight.copy_(u[:, :r] * root)
    head.prev_out.weight.copy_(w[:, :r] * root)
    head.prev_gate.weight.zero_()


@torch.no_grad()
def warm_start(head: PtpHead, folder: str) -> list[str]:
    """Copy every weight of the PTP head in `folder` whose name and shape match into `head`; the
    rest (a one-pass head's u_embed and low-rank term) keeps its initialisation (zero output:
    the warm-started head starts as the old head reading e_{j-1} where it read d_{j-1}). A folder
    whose low-rank term is of a larger rank gives its strongest components (`strongest_components`).
    Returns the names copied; refuses a folder that shares none."""
    from engine.loading.registry import load

    old = load(folder).model.state_dict()
    mine = head.state_dict()
    cut = rank_cut(old, head.config.prev_rank)
    if cut is not None:
        old = cut
        print(f"note: --init {folder}: its low-rank term cut to the {head.config.prev_rank} strongest of its "
              "components", flush=True)
    copied = [n for n, t in old.items() if n in mine and mine[n].shape == t.shape]
    if not copied:
        raise SystemExit(f"error: --init {folder}: no weight of that PTP head fits this one (sizes differ)")
    head.load_state_dict({**mine, **{n: old[n].float() for n in copied}})
    dropped = sorted(set(old) - set(mine))  # a part this head does not have (e.g. --no-output-layer's out)
    if dropped:
        print(f"note: --init {folder}: this head has no {', '.join(dropped)}; left out", flush=True)
    left = sorted(set(old) - set(copied) - set(dropped))
    if left:  # the head is built from the size flags: a size that differs from the folder's loses its weights
        print(f"warning: --init {folder}: {len(left)} of its {len(old)} weights do not fit this head and start "
              f"fresh (e.g. {left[0]}); give its sizes (--layers, --heads, --ffn, --hidden) to continue it whole",
              flush=True)
    return copied


def rank_cut(weights: dict[str, torch.Tensor], rank: int) -> dict[str, torch.Tensor] | None:
    """A head's weights with its low-rank term cut to its `rank` strongest components (whole, in
    their order), when its term has a larger rank; None when there is nothing to cut (no term here
    or there, or a rank as small): then the weights are copied as they are."""
    if not rank or "prev_in.weight" not in weights or weights["prev_in.weight"].shape[1] <= rank:
        return None
    keep = strongest_components(weights, rank)
    return {**weights, "prev_in.weight": weights["prev_in.weight"][:, keep],
            "prev_out.weight": weights["prev_out.weight"][:, keep], "prev_gate.weight": weights["prev_gate.weight"][keep]}


def strongest_components(weights: dict[str, torch.Tensor], rank: int) -> torch.Tensor:
    """The `rank` components of a head's low-rank term (prev_out @ (prev_in[d] * (1 + gate(h)))) that
    move logits most, in their order: by |prev_out column| x |prev_in column| x (1 + mean |gate row|).
    Why cut a trained term rather than start a smaller one: the term's matvec is a drafting round's
    largest read, and code-ptp cut from 128 to 64 this way kept most of its acceptance after 22 CPU
    minutes (docs/DESIGN.md §7.1)."""
    score = (weights["prev_out.weight"].float().norm(dim=0) * weights["prev_in.weight"].float().norm(dim=0)
             * (1 + weights["prev_gate.weight"].float().abs().mean(1)))
    return score.topk(rank).indices.sort().values


@torch.no_grad()
def acceptance(head: PtpHead, stream: torch.Tensor, seq_len: int, bos_id: int, windows: int = 32,
               rate: float = 0.95, seed: int = 123) -> dict:
    """The one home of the head's acceptance numbers: mean expected acceptance 1 - TV(p, q) of rows
    2..k of a round (what the speculative test accepts), for the head and for the AS-ARM's own
    parallel rows (what pipelined ASSD drafts), and the distillation KL, on `windows` held-out
    windows of `stream` at mask rate `rate`. The windows, masks and uniforms come from `seed` alone,
    so two calls on the same stream differ only by the weights: the model card (`evaluate`, test
    split) and the training curve (lab/train_curve.py, a fixed batch of the valid split)."""
    from .token_windows import batches

    gen = torch.Generator().manual_seed(seed)
    device = next(head.parameters()).device
    was_training = head.training
    head.eval()
    n = max(1, windows // 4)
    acc_h, acc_b, kl = [], [], []
    source = batches(stream, seq_len, 4, gen, bos_id)
    for _ in range(n):
        loss, st = head.distill(next(source).to(device), gen, rate)
        acc_h.append(st["accept_head"])
        acc_b.append(st["accept_base"])
        kl.append(float(loss))
    head.train(was_training)
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    return {"windows": n * 4, "mask_rate": rate, "accept_rows_2_to_k_head": mean(acc_h),
            "accept_rows_2_to_k_asarm_parallel": mean(acc_b), "distill_kl": mean(kl)}


@torch.no_grad()
def evaluate(folder: str, teacher: str | None = None, windows: int = 32, rate: float = 0.95) -> dict:
    """Model-card numbers on the test split (`acceptance`, held out from teacher and head alike)."""
    from engine.loading.registry import load

    from .token_windows import token_stream

    head = load(folder).model
    lm = load(teacher or head.config.teacher)
    head.attach_teacher(lm.model)
    held = token_stream(lm.domain, "test", lm.codec, 400_000)
    res = acceptance(head, held, lm.model.config.max_positions - 1, lm.codec.bos_id, windows, rate)
    return {"teacher": lm.name, "windows": res["windows"], "mask_rate": rate, "k": head.config.k,
            **{k: res[k] for k in ("accept_rows_2_to_k_head", "accept_rows_2_to_k_asarm_parallel", "distill_kl")}}


def eval_cli(argv: list[str]) -> int:
    """`python -m engine train ptp-eval FOLDER [--write-card]`."""
    import argparse
    import json

    ap = argparse.ArgumentParser(prog="python -m engine train ptp-eval")
    ap.add_argument("folder")
    ap.add_argument("--teacher", default=None)
    ap.add_argument("--windows", type=int, default=32)
    ap.add_argument("--write-card", action="store_true", help="write metrics.json and the README card into the folder")
    a = ap.parse_args(argv)
    res = evaluate(a.folder, a.teacher, a.windows)
    print(json.dumps(res, indent=2))
    if a.write_card:
        from .cards import write_card

        write_card(Path(a.folder), res)
    return 0
