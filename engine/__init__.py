"""Infilling studio engine: any-order infilling with exact speculative samplers.

    import engine
    r = engine.infill("The cat sat on the [MASK:4].", sampler="assd-pipelined", k=5, seed=0)
    r.text, r.spans, r.calls, r.log_prob, r.trace
"""

from .api import InfillResult, InfillRun, infill, score
from .errors import InfillError
from .trace import Step, StepKind

__all__ = ["InfillError", "InfillResult", "InfillRun", "Step", "StepKind", "infill", "score"]
