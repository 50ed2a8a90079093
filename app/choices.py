"""Which models and samplers a visitor may pick, and what the page says about them: the models
that fit a domain and sampler, the sampler's help, the note when a sampler switch changes the
model, and the knobs Statistics shows for a run. No Gradio, no store: a leaf below the form checks."""

from __future__ import annotations

import logging

from app.timing import machine_speed
from engine.loading import registry
from engine.samplers import SAMPLERS, default_sampler

log = logging.getLogger("app")

#: why a sampler needs a model other than the AS-ARM
KIND_WHY = {
    "hybrid": "it runs a hybrid model: a masked-diffusion network whose last block is causal, so it can draft "
              "many tokens at once and check them itself; the AS-ARM cannot do that",
}

def sampler_kind(sampler: str) -> str:
    """Which kind of model a sampler needs: 'hybrid' for the self-speculative family, else 'asarm'."""
    spec = SAMPLERS.get(sampler)
    return "hybrid" if spec is not None and spec.kind == "hybrid" else "asarm"


def list_models(domain: str | None = None, kind: str | None = None) -> list[str]:
    """The model names a visitor may pick, for a domain and kind (an empty list, never an error page, when listing fails)."""
    try:
        rows = registry.available()
    except Exception:  # a broken folder must not take the page down
        log.exception("listing models failed")
        return []
    return sorted(
        r["name"] for r in rows
        if (domain is None or r["domain"] == domain) and (kind is None or r["kind"] == kind)
    )


def no_model_message(domain: str, kind: str) -> str:
    """What to say when no model fits, including how an operator adds one."""
    return (
        f"No {kind} model is available for the {domain!r} domain yet. The operator can add "
        "checkpoints under assets/models/ or list folders in INFILL_MODEL_DIRS."
    )


def sampler_help(sampler: str, domain: str | None = None) -> str:
    """What the sampler does, the model it needs, why its calls may exceed its tokens (diffusion),
    and, for a domain's default, what it costs against cached sequential decoding."""
    spec = SAMPLERS.get(sampler)
    if spec is None:
        return ""
    needs = "a hybrid (self-speculative) model" if spec.kind == "hybrid" else "an AS-ARM model"
    out = f"{spec.help} Needs {needs}."
    if spec.calls_note:  # why its calls may exceed its tokens: its catalogue entry's word
        out += " " + spec.calls_note
    if domain is not None and sampler == default_sampler(domain):
        out += " " + machine_speed.speed_sentence(domain)  # this machine's figure, or where the figure is from
    return out


def switch_note(sampler: str, old_model: str | None, new_model: str | None) -> str:
    """What to say when picking `sampler` changed the model (the page never swaps it silently)."""
    if not old_model or not new_model or old_model == new_model:
        return ""
    kind = sampler_kind(sampler)
    why = KIND_WHY.get(kind, "it drives an any-subset autoregressive model (AS-ARM) as its exact density oracle")
    return f"The model changed from {old_model} to {new_model}: {sampler} needs another model, because {why}."


def shown_params(sampler: str, params: dict) -> dict:
    """A run's stored parameters reduced to the knobs its sampler reads (Statistics names no others)."""
    spec = SAMPLERS.get(sampler)
    keep = set(spec.reads) if spec is not None else set(params)
    return {k: v for k, v in params.items() if k in keep}

