"""Tiny random models whose distributions can be enumerated exactly (vocabulary of 3 symbols)."""

from __future__ import annotations

import itertools
import json
import math
import os
import random
from contextlib import contextmanager
from pathlib import Path

import torch

from engine.exactness.wrong_samplers import residual_from_q  # noqa: F401 - mutant M1, one home: the exactness check's wrong rule
from engine.inputs.masking import MaskedInput
from engine.inputs.tokenization import Codec, char_tokenizer
from engine.models.asarm import AsArmConfig, AsArmModel

ALPHABET = "abc"


def write_protein_corpus(data_dir: Path, docs: int = 30, length: int = 80) -> None:
    """data_dir/corpora/protein/{train,valid}.jsonl of random sequences: enough for a training run of a
    few steps on the CPU (the trainer tests point INFILL_DATA_DIR at data_dir)."""
    root = data_dir / "corpora" / "protein"
    root.mkdir(parents=True)
    rng = random.Random(0)
    for split in ("train", "valid"):
        rows = ["".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(length)) for _ in range(docs)]
        (root / f"{split}.jsonl").write_text("".join(json.dumps({"id": str(i), "text": t}) + "\n"
                                                     for i, t in enumerate(rows)))


@contextmanager
def cpu_data_env(data_dir: Path):
    """INFILL_DATA_DIR at data_dir and INFILL_DEVICE=cpu while inside (module-scoped fixtures, where
    pytest's monkeypatch is not at hand); the old values come back after."""
    old = {k: os.environ.get(k) for k in ("INFILL_DATA_DIR", "INFILL_DEVICE")}
    os.environ.update(INFILL_DATA_DIR=str(data_dir), INFILL_DEVICE="cpu")
    try:
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def tiny_codec() -> Codec:
    return Codec(char_tokenizer(ALPHABET))


def save_tiny_asarm(folder: Path, seed: int = 0, length: int = 6, scale: float = 0.6) -> Path:
    """A random two-stream model in float64, with large weights so conditionals differ a lot."""
    torch.manual_seed(seed)
    codec = tiny_codec()
    cfg = AsArmConfig(vocab_size=codec.vocab_size, hidden_size=16, num_layers=2, num_heads=2,
                      intermediate_size=32, max_positions=length + 1, domain="text")
    model = AsArmModel(cfg).to(torch.float64)
    with torch.no_grad():
        for prm in model.parameters():
            if prm.dim() > 1:
                prm.normal_(0, scale)
    model.save_pretrained(folder)
    codec.hf.save_pretrained(folder)
    return folder


def masked_input(codec: Codec, visible: dict[int, str], length: int) -> MaskedInput:
    """A MaskedInput with the given visible characters and everything else masked."""
    tokens = [codec.mask_id] * length
    for i, ch in visible.items():
        tokens[i] = codec.encode(ch)[0]
    masked = [i for i in range(length) if i not in visible]
    # pieces/spans only matter for text reconstruction; one span per masked run
    ranges, pieces, cur = [], [""], ""
    i = 0
    while i < length:
        if i in visible:
            pieces[-1] += visible[i]
            i += 1
        else:
            j = i
            while j < length and j not in visible:
                j += 1
            ranges.append((i, j))
            pieces.append("")
            i = j
    del cur
    return MaskedInput(tokens=tokens, masked=masked, pieces=pieces, span_ranges=ranges, mask_id=codec.mask_id)


def exact_distribution(lm, mi: MaskedInput, temperature: float = 1.0) -> dict[tuple[int, ...], float]:
    """Every completion of the masked positions with its probability under sequential decoding
    (product of tempered conditionals, masked positions left to right), enumerated by brute force.

    Independent of the code under test: no oracle, no sampler, no cache. Each completion is one
    full-context forward of the model itself, the masked tokens ranked in decode order and row r
    limited to ranks < r + 1 (the prompt and the masked tokens before it); for a native AS-ARM the
    forward is tests/support/reference_forward.py (the original unoptimised one). A foreign model (the XLNet
    adapter) has no such forward: its joint comes from the oracle's density mode."""
    from tests.support.reference_forward import reference_forward

    model = lm.model
    if not (hasattr(model, "query_embed") and hasattr(model, "blocks")):
        return exact_distribution_via_oracle(lm, mi, temperature)
    symbols = [lm.codec.encode(ch)[0] for ch in ALPHABET]
    special = model.special_mask().cpu()
    vis, m = mi.visible, len(mi.masked)

    def row(xs: list[int]) -> torch.Tensor:
        return torch.tensor([xs], dtype=torch.long, device=model.device)

    out = {}
    with torch.no_grad():
        for combo in itertools.product(symbols, repeat=m):
            ids = [model.config.bos_token_id] + [mi.tokens[i] for i in vis] + list(combo)
            pos = [0] + [i + 1 for i in vis] + [p + 1 for p in mi.masked]
            rank = [0] * (1 + len(vis)) + list(range(1, m + 1))
            qpos, qlim = row([p + 1 for p in mi.masked]), row(list(range(1, m + 1)))
            logits = reference_forward(model, row(ids), row(pos), row(rank), qpos, qlim)
            logits = mi.constrain(logits[0].to(torch.float64).cpu().masked_fill(special, float("-inf")), mi.masked)
            logp = torch.log_softmax(logits / temperature, dim=-1)
            out[combo] = math.exp(sum(float(logp[r, t]) for r, t in enumerate(combo)))
    return out


def exact_distribution_via_oracle(lm, mi: MaskedInput, temperature: float = 1.0) -> dict[tuple[int, ...], float]:
    """The same joint through engine.samplers.oracle in density mode: only to cross-check exact_distribution."""
    from engine.samplers.context import make_oracle

    symbols = [lm.codec.encode(ch)[0] for ch in ALPHABET]
    out = {}
    for combo in itertools.product(symbols, repeat=len(mi.masked)):
        oracle = make_oracle(lm, mi, use_cache=False)
        drafts = list(zip(mi.masked, combo))
        logits = oracle.call(drafts, [(pos, i) for i, (pos, _) in enumerate(drafts)])
        logp = torch.log_softmax(logits / temperature, dim=-1)
        out[combo] = math.exp(sum(float(logp[i, t]) for i, t in enumerate(combo)))
    return out


def g_test(counts: dict, probs: dict, n: int) -> float:
    """Goodness of fit: p-value of the G statistic (chi-square with len-1 dof)."""
    from scipy.stats import chi2

    g = 0.0
    for key, pr in probs.items():
        c = counts.get(key, 0)
        if c:
            g += 2 * c * math.log(c / (n * pr))
    assert set(counts) <= set(probs), "a sampler produced an impossible outcome"
    return float(chi2.sf(g, len(probs) - 1))


def tv(a: torch.Tensor, b: torch.Tensor) -> float:
    """Total variation distance between two probability vectors."""
    return 0.5 * float((a - b).abs().sum())


def asarm_dependence(lm, mi: MaskedInput, temperature: float = 1.0) -> dict[str, float]:
    """How strongly the fixture's conditionals depend on the other masked positions.

    prev_tv: over every later masked position and every prefix stem, the largest TV between the
      target rows q(x_r | stem, x_{r-1} = a) for different a; the minimum over (r, stem) is reported,
      so *every* factor depends on its predecessor by at least this much.
    draft_tv: for every later position, the largest TV between its parallel (draft) row and a
      target row; the minimum over positions (drafts are often rejected when this is large).
    max_joint / max_first: the most likely outcome and the most likely first token (no dominant one).
    """
    from engine.samplers.acceptance import tempered_probs
    from engine.samplers.context import make_oracle

    sym = [lm.codec.encode(ch)[0] for ch in ALPHABET]
    m = len(mi.masked)
    rows = {}
    for r in range(m):
        for pre in itertools.product(sym, repeat=r):
            logits = make_oracle(lm, mi, False).call(list(zip(mi.masked[:r], pre)), [(mi.masked[r], r)])
            rows[pre] = tempered_probs(logits, temperature)[0]
    prev_tv = min(
        max(tv(rows[stem + (a,)], rows[stem + (b,)]) for a in sym for b in sym)
        for r in range(1, m) for stem in itertools.product(sym, repeat=r - 1)
    )
    p = tempered_probs(make_oracle(lm, mi, False).call([], [(pos, 0) for pos in mi.masked]), temperature)
    draft_tv = min(max(tv(p[r], rows[pre]) for pre in itertools.product(sym, repeat=r)) for r in range(1, m))
    joint = exact_distribution(lm, mi, temperature)
    return {"prev_tv": prev_tv, "draft_tv": draft_tv, "max_joint": max(joint.values()),
            "max_first": float(rows[()].max())}


def trace_log_prob(trace) -> float:
    """log P(completion) read from a run's own trace: the sum of log q over the deciding steps (q of
    each kept token under its exact target row, as the sampler computed it while running). A path
    independent of engine.score, which recomputes the joint in one density pass."""
    from engine.trace import DECIDING_KINDS

    return sum(math.log(q) for s in trace if s.kind in DECIDING_KINDS for q in s.q)
