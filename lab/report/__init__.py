"""`python -m engine report [--quick]`: the results report, docs/REPORT.md plus PNG figures.

Sections: exact samplers against sequential decoding, acceptance explained, the
self-speculative sampler against MDM, HumanEval single-line infilling, scaling with length and
masking rate, provenance. Every sentence with a number in it is written from measured values.

The package reads in the order the report is made: plan.py (what to measure), measure.py (models
and interleaved sampler runs), analyse.py (statistics), render.py and figures.py (markdown and
figures), sections.py (sections 1-5, each measure -> analyse -> render), provenance.py (section 6),
command.py (the command line). Samplers run interleaved on the same inputs and seeds (so drift in
machine load hits all of them alike) and wall-clock ratios are only taken within one run. A model
that is missing or cannot be loaded is skipped with a visible note; a section that fails is
reported as failed, never fatal. Figures are exported as PNG through plotly + kaleido (which
drives the system Chromium); when the static export fails the figure is written as
self-contained HTML and the report says so.
"""

from __future__ import annotations

from .command import cli

__all__ = ["cli"]
