"""Plotly figures: the compare view's per-run curves and the statistics tab's aggregates."""

from __future__ import annotations

from collections import defaultdict

import plotly.graph_objects as go

from engine.trace import DECIDING_KINDS, Step, StepKind

LAYOUT = dict(template="plotly_white", height=340, margin=dict(l=50, r=20, t=50, b=45),
              legend=dict(orientation="h", y=-0.2))


def _empty(title: str, msg: str = "no data yet") -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=title, **LAYOUT)
    fig.add_annotation(text=msg, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def revealed_curve(steps: list[Step]) -> tuple[list[float], list[int]]:
    """(calls, tokens decided) after every deciding step, starting at (0, 0)."""
    xs, ys, n = [0.0], [0], 0
    for s in steps:
        if s.kind in DECIDING_KINDS:
            n += len(s.positions)
            xs.append(s.calls)
            ys.append(n)
    return xs, ys


def accepted_run_lengths(steps: list[Step]) -> list[int]:
    """Accepted drafts per round (the run length before the first rejection)."""
    per: dict[int, int] = defaultdict(int)
    seen: set[int] = set()
    for s in steps:
        seen.add(s.round)
        if s.kind == StepKind.ACCEPT:
            per[s.round] += len(s.positions)
    return [per[r] for r in sorted(seen)]


def compare_figures(named: list[tuple[str, list[Step]]]) -> tuple[go.Figure, go.Figure]:
    f1 = go.Figure()
    f2 = go.Figure()
    top = 0
    for name, steps in named:
        xs, ys = revealed_curve(steps)
        top = max(top, ys[-1])
        f1.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", line_shape="hv", name=name))
        lens = accepted_run_lengths(steps)
        f2.add_trace(go.Bar(x=list(range(len(lens))), y=lens, name=name))
    if top:
        f1.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="1 token per call",
                                line=dict(dash="dot", color="gray")))
    f1.update_layout(title="Tokens revealed against network calls", xaxis_title="calls",
                     yaxis_title="tokens decided", **LAYOUT)
    f2.update_layout(title="Accepted run length per round", xaxis_title="round",
                     yaxis_title="accepted drafts", barmode="group", **LAYOUT)
    return f1, f2


def _label(g) -> str:
    k = g.params.get("k")
    return f"{g.sampler} · {g.model}" + (f" · k={k}" if k is not None and g.sampler != "sequential" else "")


def stats_figures(groups: list) -> tuple[go.Figure, go.Figure, go.Figure]:
    if not groups:
        msg = "no stored runs match the filters"
        return (_empty("Acceptance rate by position in the round", msg),
                _empty("Tokens per call", msg), _empty("Calls against masked tokens", msg))
    f1 = go.Figure()
    for g in groups:
        pts = [(r.rank, r.rate) for r in g.acceptance_by_rank if r.rate is not None]
        if pts:
            f1.add_trace(go.Scatter(x=[p[0] for p in pts], y=[p[1] for p in pts], mode="lines+markers",
                                    name=_label(g)))
    f1.update_layout(title="Acceptance rate by position in the round", xaxis_title="rank in round (0 = first draft)",
                     yaxis_title="acceptance rate", yaxis_range=[0, 1.05], **LAYOUT)
    f2 = go.Figure()
    for g in groups:
        if g.tokens_per_call:
            f2.add_trace(go.Box(y=g.tokens_per_call, name=_label(g), boxpoints="all", jitter=0.3))
    f2.update_layout(title="Tokens per call, per sampler and model", yaxis_title="masked tokens / calls",
                     showlegend=False, **LAYOUT)
    f3 = go.Figure()
    top = 1
    for g in groups:
        if g.calls_vs_masked:
            xs = [m for m, _ in g.calls_vs_masked]
            ys = [c for _, c in g.calls_vs_masked]
            top = max(top, *xs, *ys)
            f3.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name=_label(g)))
    f3.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="calls = tokens",
                            line=dict(dash="dot", color="gray")))
    f3.update_layout(title="Calls against masked tokens", xaxis_title="masked tokens",
                     yaxis_title="network calls", **LAYOUT)
    return f1, f2, f3
