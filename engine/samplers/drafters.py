"""Proposals that do not come from the AS-ARM itself, and the one place drafters are built.

A drafter (the `Drafter` contract of engine/samplers/drafter_contract.py) returns, for the next positions
of a round, draft tokens and the full proposal rows they were drawn from; ASSD then verifies them
against the AS-ARM with the shared acceptance routine. Exactness needs only that the proposal is
fixed before the acceptance randomness is drawn.

DRAFTERS says how each drafter is built from a run (RunContext): the catalogue's `assd-ngram` and
`assd-diffusion` are `drafted("ngram")` and `drafted("diffusion")`. The PTP head of `assd-ptp` is
not a `propose` drafter (it reads the AS-ARM's states inside the pipelined call, engine/samplers/ptp.py)
but its second model is declared the same way, through the catalogue's `SecondModel`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator

import numpy as np
import torch

from engine.samplers.acceptance import sample_categorical

from ..errors import IncompatibleModelsError
from ..trace import Step
from .assd import assd_drafted
from .diffusion_drafter import DiffusionDrafter
from .diffusion_drafter import check_pair as diffusion_fits
from .drafter_contract import Drafter, SecondModel
from .ngram_index import NgramIndex
from .ngram_prior import CorpusBigram, load_prior
from .spec import SamplerSpec, knob_names


class NgramDrafter(Drafter):
    """A `Drafter` without a network. Context bigram drafter (the ASSD paper's n-gram variant): counts token pairs in the visible
    and decided text, drafts left to right (each draft conditions on the previous draft), and mixes
    in a fallback row so that unseen contexts still propose something sensible: the training
    corpus's followers of the previous two tokens, or of the previous one, where the model folder
    has them (`prior`, engine/samplers/ngram_prior.py), else the context's smoothed unigram.

    It drafts only while it is sure enough: `sure`, the product of its rows' top probabilities so far,
    must stay >= `confidence` (the knob), else the round stops drafting there and the verifier's row
    decides that position exactly (a round with no draft is one sequential step). Why: each draft
    costs the verify call two rows, a content row and a query row, whether it is accepted or not,
    and a bigram row of a mostly masked window is seldom right; the top probability is a number of the
    row alone, known before the draft is drawn (docs/DESIGN.md, "Drafting only where it pays")."""

    name = "ngram"
    passes = 0  # no network: no forward passes (bench assd's drafter_passes)

    def __init__(self, *, vocab_size: int, special_ids: list[int], mix: float = 0.8, alpha: float = 0.1,
                 confidence: float = 0.0, prior: CorpusBigram | None = None):
        self.allowed = np.ones(vocab_size)
        self.allowed[special_ids] = 0.0
        self.mix, self.alpha = mix, alpha
        self.confidence = confidence  # 0: a draft for every position, as the paper's rounds
        self.prior = prior  # the corpus's followers of each token (None: the context's unigram instead)
        self.index = NgramIndex(vocab_size)  # counts kept up to date, not recounted each round
        self.uni_row: np.ndarray  # the smoothed unigram row, recomputed only when the counts moved (the
        # index starts "changed", so the first propose computes it)

    def propose(
        self, known: list[int | None], positions: list[int], gen: torch.Generator, temperature: float = 1.0
    ) -> tuple[list[int], list[torch.Tensor], float]:
        """known[i] is the token at position i or None. Returns drafts for a prefix of `positions`
        (possibly none: see `confidence`), their proposal rows, calls spent. The rows are NumPy
        arithmetic, handed over as tensors sharing their memory (torch.from_numpy)."""
        index = self.index
        index.sync(known)
        if index.changed:
            uni = (index.uni + self.alpha) * self.allowed
            self.uni_row = uni / uni.sum()
            index.changed = False
        uni = self.uni_row
        drafts, rows = [], []
        drafted: dict[int, int] = {}  # this round's drafts by position: a later draft's context
        sure = 1.0
        for pos in positions:
            prev = drafted.get(pos - 1, known[pos - 1]) if pos > 0 else None
            if prev is None or self.prior is None:
                back = uni  # the fallback row
            else:
                back = self.prior.row(prev, uni, drafted.get(pos - 2, known[pos - 2]) if pos > 1 else None)
            row = back
            if prev is not None and prev in index.big:
                b = index.big[prev] * self.allowed
                if float(b.sum()) > 0:  # a context seen only before special tokens has no bigram row
                    row = self.mix * b / b.sum() + (1 - self.mix) * back
            sure *= float(row.max())  # of the row alone: fixed before its draft is drawn
            if sure < self.confidence:
                break  # this position and the rest of the round: the verifier's exact rows
            p = torch.from_numpy(row)
            tok = sample_categorical(p, gen)
            drafted[pos] = tok
            drafts.append(tok)
            rows.append(p)
        return drafts, rows, 0.0


def _ngram(ctx, *, confidence: float) -> Drafter:
    """Bigrams of the run's own context over the corpus's, where the AS-ARM's folder holds them: no
    network; `confidence` says how sure it must stay to draft."""
    cfg = ctx.lm.codec
    prior = load_prior(getattr(ctx.lm, "path", None), cfg.vocab_size)
    return NgramDrafter(vocab_size=cfg.vocab_size, special_ids=cfg.special_ids, confidence=confidence, prior=prior)


def _diffusion(ctx, *, steps: int) -> Drafter:
    """`steps` masked-diffusion steps of ctx.draft_lm (a hybrid on the AS-ARM's tokenizer, checked by the
    catalogue's SecondModel when the run was prepared) per round."""
    if ctx.draft_lm is None:
        raise IncompatibleModelsError("assd-diffusion needs a hybrid draft model (--draft-model).")
    if len(ctx.mi.tokens) > ctx.draft_lm.max_tokens:
        raise IncompatibleModelsError(
            f"The input is {len(ctx.mi.tokens)} tokens; the draft model {ctx.draft_lm.name} takes at most "
            f"{ctx.draft_lm.max_tokens}."
        )
    return DiffusionDrafter(ctx.draft_lm.model, steps)


#: Every `propose` drafter by name: how it is built from a run (engine.samplers.context.RunContext) and
#: the knobs it reads (the builder's keyword arguments, as a run function's: engine.samplers.spec).
#: The one place drafters are constructed for runs.
DRAFTERS: dict[str, Callable[..., Drafter]] = {"ngram": _ngram, "diffusion": _diffusion}


def build_drafter(name: str, ctx, knobs: dict[str, object]) -> Drafter:
    """The drafter `name` for this run (DRAFTERS), given the run's knob values (it takes those it reads)."""
    build = DRAFTERS[name]
    return build(ctx, **{n: knobs[n] for n in knob_names(build)})


def run_drafted(name: str, ctx, k: int, temperature: float, drafter_knobs: dict[str, object]) -> Iterator[Step]:
    """What a drafted entry runs: ASSD with the drafter DRAFTERS[name] built for this run. A function of
    its own, called when the run starts (not when the catalogue is built at import), so that what it
    does is tested like any sampler code, mutation testing included."""
    drafter = build_drafter(name, ctx, drafter_knobs)
    return assd_drafted(ctx.oracle, ctx.mi, ctx.rec, ctx.gen, temperature, k, drafter, ctx.extra_calls,
                        ctx.drafter_passes, ctx.drafter_seconds)


def drafted(name: str) -> Callable[..., Iterator[Step]]:
    """The catalogue's run function of ASSD drafted by DRAFTERS[name], verified by the run's AS-ARM: it
    reads k and temperature, and the knobs its drafter's builder reads (its signature says which).
    Runs at import, when the catalogue is built."""

    def run(ctx, *, k: int, temperature: float, **drafter_knobs: object) -> Iterator[Step]:
        return run_drafted(name, ctx, k, temperature, drafter_knobs)

    own = inspect.signature(run).parameters
    builder = [p for p in inspect.signature(DRAFTERS[name]).parameters.values() if p.kind is p.KEYWORD_ONLY]
    run.__signature__ = inspect.Signature([own["ctx"], own["k"], own["temperature"], *builder])
    run.__name__ = run.__qualname__ = f"assd_{name}"
    run.__doc__ = f"ASSD on the AS-ARM with drafts from the {name} drafter (engine.samplers.drafters.DRAFTERS)."
    return run


#: the catalogue's entries (engine.samplers.SAMPLERS) of ASSD drafted by a drafter of the table above
NGRAM_SPEC = SamplerSpec(
    name="assd-ngram", kind="asarm", cache=True,
    help="ASSD whose drafts come from n-grams instead of the network (the context's bigrams over the training "
    "corpus's followers of the last two tokens), drafted only while they are sure enough (confidence). Exact.",
    run=drafted("ngram"))
DIFFUSION_SPEC = SamplerSpec(
    name="assd-diffusion", kind="asarm", cache=True,
    help="ASSD whose drafts come from T masked-diffusion steps of a hybrid on the same tokenizer; "
    "the AS-ARM verifies them. Exact. A few steps per round (default 4) keep drafting cheap.",
    run=drafted("diffusion"), default_steps=4, second=SecondModel("hybrid", diffusion_fits),
    calls_note="Its calls can exceed the tokens it fills: each round spends a few diffusion steps of the "
               "drafter (counted as calls) before the AS-ARM checks the drafts, and rejected drafts are "
               "redrawn next round.")
