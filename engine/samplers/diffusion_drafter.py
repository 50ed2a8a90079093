"""Diffusion-drafted ASSD (the SpecDiff idea carried to infilling, docs/DESIGN.md §3.5).

T steps of a masked diffusion model (a hybrid's non-causal head) propose the drafts of a round;
the AS-ARM verifies them with the shared acceptance routine (engine.samplers.assd.assd_drafted),
so the output is exactly the AS-ARM's distribution whatever the drafter does.

For exactness every draft's proposal row may depend only on the context and on drafts of
*earlier* ranks (the verification walks left to right). So the drafter reveals the round's positions
left to right in chunks whose sizes follow a cosine grid of T steps: each step is one
non-causal pass on the decided tokens plus the drafts of earlier chunks; every position of the
chunk is drawn from its own row. A step whose chunk is empty costs nothing. Calls are counted in
the drafter network's own units (non-causal share of the hybrid per step) and added to the run's
extra calls. The sampler `assd-diffusion` is built from this drafter in engine/samplers/drafters.py.
"""

from __future__ import annotations

import torch

from engine.samplers.acceptance import sample_categorical, tempered_probs

from ..errors import IncompatibleModelsError
from .drafter_contract import Drafter
from .hybrid_passes import cosine_remaining, nc_pass


class DiffusionDrafter(Drafter):
    """A `Drafter` (engine/samplers/drafter_contract.py), built by engine/samplers/drafters.py's DRAFTERS.
    Drafts a round with T steps of the hybrid's non-causal head, left to right in chunks, so each
    draft's row depends only on the context and earlier drafts (what exactness needs)."""

    name = "diffusion"

    def __init__(self, model, steps: int):
        self.model = model
        self.steps = steps
        self.mask = model.config.mask_token_id
        self.bos = model.config.bos_token_id
        self.passes = 0  # forward passes of the hybrid's non-causal head so far

    def propose(
        self, known: list[int | None], positions: list[int], gen: torch.Generator, temperature: float = 1.0
    ) -> tuple[list[int], list[torch.Tensor], float]:
        """Drafts and proposal rows for `positions`, and the drafter calls spent (in hybrid units)."""
        ids = [self.bos] + [self.mask if t is None else t for t in known]
        remaining = cosine_remaining(len(positions), self.steps)
        drafts: list[int] = []
        rows: list[torch.Tensor] = []
        spent = 0.0
        for s in range(1, self.steps + 1):
            n = remaining[s - 1] - remaining[s]
            if not n:
                continue
            chunk = positions[len(drafts) : len(drafts) + n]
            _, logits = nc_pass(self.model, ids)
            self.passes += 1
            spent += self.model.config.nc_share
            probs = tempered_probs(logits[[pos + 1 for pos in chunk]], temperature)
            for j, pos in enumerate(chunk):
                tok = sample_categorical(probs[j], gen)
                ids[pos + 1] = tok
                drafts.append(tok)
                rows.append(probs[j])
        return drafts, rows, spent


def check_pair(lm, draft_lm) -> None:
    """The AS-ARM and the drafting hybrid must share one tokenizer (same ids for same strings)."""
    if draft_lm.kind != "hybrid":
        raise IncompatibleModelsError(
            f"--draft-model {draft_lm.name} is a {draft_lm.kind} model; assd-diffusion drafts with a hybrid "
            "(masked diffusion) model."
        )
    if lm.codec.vocab != draft_lm.codec.vocab:
        raise IncompatibleModelsError(
            f"{lm.name} and {draft_lm.name} use different vocabularies ({lm.codec.vocab_size} vs "
            f"{draft_lm.codec.vocab_size} tokens); assd-diffusion needs an AS-ARM and a hybrid trained on the "
            "same tokenizer (e.g. text-asarm with text-hybrid)."
        )
