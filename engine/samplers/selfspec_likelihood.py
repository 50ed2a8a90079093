"""Exact likelihood of a self-speculative sample (the paper's Proposition 3.1, extended to the
window functions and the N inner verify loops of selfspec.py).

Given the decode order sigma (ranks 1..m) and the final tokens x, write for an outer iteration that
starts with i positions revealed: p_k = non-causal row of rank k (pass on x_sigma(1..i)), q_k =
target of rank k (q_{i+1} = p_{i+1}; for k > i + 1 the causal row given x_sigma(i+1..k-1)).
A run of accepts ending in a rejection at rank j produces x_{s+1..j} with probability
  prod_{k=s+1}^{j-1} min(p_k, q_k)(x_k) * max(q_j - p_j, 0)(x_j)
(accept w.p. min(1, q/p) times draw p; reject-then-residual gives max(q - p, 0) exactly), and a
run of accepts to the end of the window w has prod min(p_k, q_k)(x_k). Drafts after a rejection
never influenced anything (targets are causal), so in the next inner loop they are still fresh
draws from p: the same factors apply with the same q (q_k depends only on x_{<k} within the
window). A dynamic programme over (inner loop, positions decided in the window) inside each outer
iteration, and over "revealed so far" across iterations, sums every path: m non-causal and m
causal passes, O(m^2 N) arithmetic, all in float64 log space.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from engine.inputs.domains import unindented
from engine.inputs.masking import MaskedInput, completed_from_ranges
from engine.samplers.acceptance import tempered_probs

from ..errors import BadParameterError
from ..params import KNOBS, settle
from ..trace import DECIDING_KINDS
from .hybrid_passes import causal_pass, model_ids, nc_pass
from .selfspec import window_size

NEG = -math.inf


def _lae(a: float, b: float) -> float:
    return float(np.logaddexp(a, b))


def log_prob_given_order(
    model, mi: MaskedInput, tokens: list[int], order: list[int], temperature: float = 1.0,
    dtau: float = 0.05, window: str = "cosine", inner: int = 1,
) -> float:
    """log P(self-spec outputs tokens at the masked positions | decode order `order`)."""
    m = len(order)
    if sorted(order) != sorted(mi.masked):
        raise BadParameterError("the decode order must be a permutation of the masked positions")
    base = model_ids(model, mi.tokens)
    log_f = [NEG] * (m + 1)
    log_f[0] = 0.0
    for i in range(m):
        if log_f[i] == NEG:
            continue
        ids = list(base)
        for pos in order[:i]:
            ids[pos + 1] = tokens[pos]
        w = window_size(i, m, dtau, window)
        positions = order[i : i + w]
        xs = [tokens[pos] for pos in positions]
        h, logits = nc_pass(model, ids, mi)
        p = tempered_probs(logits[[pos + 1 for pos in positions]], temperature)
        q = p.clone()
        if w > 1:
            q[1:] = tempered_probs(causal_pass(model, h, positions, xs, mi), temperature)
        px = np.array([float(p[k, t]) for k, t in enumerate(xs)])
        qx = np.array([float(q[k, t]) for k, t in enumerate(xs)])
        with np.errstate(divide="ignore"):
            la = np.log(np.minimum(px, qx))
            lr = np.log(np.maximum(qx - px, 0.0))
        lr[0] = NEG  # the first draft of a window is never rejected (q = p)
        g = np.full(w + 1, NEG)
        g[0] = 0.0
        done = NEG
        for _ in range(inner):
            new = np.full(w + 1, NEG)
            for s in range(w):
                if g[s] == NEG:
                    continue
                acc = np.concatenate([[0.0], np.cumsum(la[s:])])  # acc[t] = log prod la[s..s+t-1]
                # reject at rank j (accept s..j-1): lands on j + 1
                rej = g[s] + acc[: w - s] + lr[s:]
                new[s + 1 :] = np.logaddexp(new[s + 1 :], rej)
                new[w] = np.logaddexp(new[w], g[s] + acc[w - s])  # all accepted
            done = _lae(done, float(new[w]))
            new[w] = NEG
            g = new
        log_f[i + w] = _lae(log_f[i + w], log_f[i] + done)
        for s in range(1, w):
            if g[s] > NEG:
                log_f[i + s] = _lae(log_f[i + s], log_f[i] + float(g[s]))
    return log_f[m]


def log_prob_marginal(model, mi: MaskedInput, tokens: list[int], max_orders: int = 5040, **kw) -> float:
    """log P(tokens) averaged over all uniformly random decode orders (tiny inputs only)."""
    m = len(mi.masked)
    if math.factorial(m) > max_orders:
        raise BadParameterError(
            f"{m} masked tokens have {math.factorial(m)} decode orders: too many to average over. "
            "Score a stored run (result=...) or give its decode order (order=[...])."
        )
    vals = [log_prob_given_order(model, mi, tokens, list(o), **kw) for o in itertools.permutations(mi.masked)]
    return float(np.logaddexp.reduce(vals) - math.log(len(vals)))


def order_from_trace(trace) -> list[int]:
    """The decode order a self-spec run used, read back from its trace (positions in the order
    they were decided)."""
    seen: list[int] = []
    for s in trace:
        if s.kind in DECIDING_KINDS:
            seen.extend(p for p in s.positions if p not in seen)
    return seen


def score_self_spec(
    text: str | None = None,
    ranges: list[tuple[int, int]] | None = None,
    *,
    model: str | None = None,
    domain: str = "text",
    result=None,
    order: list[int] | None = None,
    temperature: float | None = None,
    dtau: float | None = None,
    window: str | None = None,
    inner: int | None = None,
) -> float:
    """Log-likelihood of a self-speculative sample. With `result` (a self-spec InfillResult), the
    exact log P(tokens | the decode order that run drew) under that run's settings. With a completed
    `text` and its filled character `ranges`, the given `order` (MaskedInput positions) or, if none,
    the average over all decode orders (feasible for a handful of masked tokens only)."""
    from engine.loading.registry import default_model, load

    params: dict = {}
    if result is not None:
        if result.sampler != "self-spec":
            raise BadParameterError(f"this run used {result.sampler!r}, not self-spec")
        lm = load(model or result.model_path or result.model)
        mi = result.input_for(lm)
        tokens = list(result.tokens)
        params = dict(result.params)
        if order is None:
            order = order_from_trace(result.trace)
    else:
        if text is None or not ranges:
            raise BadParameterError("score needs a completed text and the character ranges that were filled.")
        lm = load(model or default_model(domain, "hybrid"))
        mi, tokens = completed_from_ranges(text, ranges, lm.codec, max_tokens=lm.max_tokens,
                                           after_newline=unindented(lm.domain))  # the law infill samples
    if lm.kind != "hybrid":
        raise BadParameterError(f"{lm.name} is a {lm.kind} model; the self-spec likelihood needs a hybrid.")
    given = {"temperature": temperature, "dtau": dtau, "window": window, "inner": inner}
    # what is given, else the run's recorded value, else the table's default: settled in the one place
    # (engine.params.settle), with the same types and ranges as a run
    knobs = settle({**{n: v for n, v in params.items() if n in KNOBS},
                    **{n: v for n, v in given.items() if v is not None}}, who="score_self_spec")
    kw = {n: knobs[n] for n in given}
    if order is not None:
        return log_prob_given_order(lm.model, mi, tokens, list(order), **kw)
    return log_prob_marginal(lm.model, mi, tokens, **kw)
