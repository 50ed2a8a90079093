"""The model's exact law over the fills of a short masked span, which the exactness check sets the
samplers' frequencies against (engine/exactness/check.py):
- an AS-ARM: the chain of (tempered) conditionals in lattice order, which is what sequential
  decoding samples and what every exact speculative sampler must match. Every fill with
  probability >= the cell threshold is found exactly by a prefix search (a prefix is kept only if
  its own probability is >= the threshold, so at most 1/threshold prefixes per position);
- a hybrid: the self-speculative sampler's own likelihood (Proposition 3.1,
  engine/samplers/selfspec_likelihood.py) averaged over the uniformly random decode orders, under
  the check's dtau / window / inner. It is computed for every fill some sampler drew (no prefix
  search exists for it).

Its own module because this is the part that asks the model and must be right for the check to
mean anything: a reader verifying the law reads it without the test or the run loop."""

from __future__ import annotations

import math

import torch

from engine.loading.loaded_model import LoadedModel
from engine.params import KnobValues
from engine.samplers.acceptance import tempered_probs
from engine.samplers.context import make_oracle

Fill = tuple[int, ...]  # token ids at the masked positions, in lattice (left-to-right) order


def fill_key(fill: Fill) -> str:
    """A fill as a JSON key: its token ids joined by commas."""
    return ",".join(str(t) for t in fill)


def asarm_cells(lm: LoadedModel, mi, threshold: float, temperature: float) -> dict[Fill, float]:
    """Every fill whose exact probability (chain of tempered conditionals in lattice order) is at
    least `threshold`, with that probability. A prefix below the threshold cannot grow into a fill
    above it, so the search is complete; it spends one network call per kept prefix."""
    frontier: list[tuple[Fill, float]] = [((), 1.0)]
    for r, pos in enumerate(mi.masked):
        grown = []
        for prefix, pp in frontier:
            oracle = make_oracle(lm, mi, use_cache=False)
            row = tempered_probs(oracle.call(list(zip(mi.masked[:r], prefix)), [(pos, r)]), temperature)[0]
            joint = row * pp
            for tok in torch.nonzero(joint >= threshold).flatten().tolist():
                grown.append((prefix + (tok,), float(joint[tok])))
        frontier = grown
    return dict(frontier)


def asarm_prob(lm: LoadedModel, mi, fill: Fill, temperature: float) -> float:
    """The exact probability of one fill: the chain of tempered conditionals, one density pass."""
    oracle = make_oracle(lm, mi, use_cache=False)
    drafts = list(zip(mi.masked, fill))
    logits = oracle.call(drafts, [(pos, i) for i, (pos, _) in enumerate(drafts)])
    rows = tempered_probs(logits, temperature)
    return float(math.prod(float(rows[i, t]) for i, t in enumerate(fill)))


#: the knobs the hybrid's exact law reads, the self-speculative sampler's (the CLI's exactness flags say so)
LAW_KNOBS = ("temperature", "dtau", "window", "inner")


def hybrid_prob(lm: LoadedModel, mi, fill: Fill, knobs: KnobValues) -> float:
    """The self-speculative sampler's probability of one fill (Proposition 3.1), averaged over the
    decode orders, under the check's LAW_KNOBS, read from the check's settled knob values (the ones its
    draws ran with)."""
    from engine.samplers.selfspec_likelihood import log_prob_marginal

    tokens = list(mi.tokens)
    for pos, tok in zip(mi.masked, fill):
        tokens[pos] = tok
    return math.exp(log_prob_marginal(lm.model, mi, tokens, **{n: knobs[n] for n in LAW_KNOBS}))
