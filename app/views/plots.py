"""Plotly figures: the compare view's per-run curves and the statistics tab's aggregates."""

from __future__ import annotations

from collections import defaultdict

import plotly.graph_objects as go

from app.choices import shown_params
from engine.params import KNOBS
from engine.trace import DECIDING_KINDS, Step

# the legend sits under the plot, below the x-axis title (never over the data or the axis labels)
LAYOUT = dict(template="plotly_white", height=400, margin=dict(l=60, r=20, t=50, b=40),
              legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0, font=dict(size=11)),
              title=dict(x=0.02, xanchor="left", font=dict(size=15)))


def _layout(fig: go.Figure, title: str, n_legend: int = 0, **kw) -> None:
    """Title, axis titles and room under the plot for a legend of n_legend rows."""
    lay = {**LAYOUT, **kw}
    lay["title"] = {**LAYOUT["title"], "text": title}
    lay["margin"] = {**LAYOUT["margin"], "b": 60 + 22 * n_legend}
    lay["height"] = LAYOUT["height"] + 22 * n_legend
    fig.update_layout(**lay)


def _empty(title: str, msg: str = "no data yet") -> go.Figure:
    fig = go.Figure()
    _layout(fig, title)
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


def decided_per_round(steps: list[Step]) -> list[int]:
    """Tokens decided per round, whatever decided them (accepted, resampled, bonus, sampled,
    revealed): a sequential run shows its one token per round instead of an empty chart."""
    per: dict[int, int] = defaultdict(int)
    seen: set[int] = set()
    for s in steps:
        seen.add(s.round)
        if s.kind in DECIDING_KINDS:
            per[s.round] += len(s.positions)
    return [per[r] for r in sorted(seen)]


def compare_figures(named: list[tuple[str, list[Step]]]) -> tuple[go.Figure, go.Figure]:
    """The Compare tab's charts: tokens decided against network calls (with the one-per-call line),
    and tokens decided per round, one trace per side."""
    f1 = go.Figure()
    f2 = go.Figure()
    top = 0
    for name, steps in named:
        xs, ys = revealed_curve(steps)
        top = max(top, ys[-1])
        f1.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", line_shape="hv", name=name))
        lens = decided_per_round(steps)
        f2.add_trace(go.Bar(x=list(range(1, len(lens) + 1)), y=lens, name=name))
    if top:
        f1.add_trace(go.Scatter(x=[0, top], y=[0, top], mode="lines", name="1 token per call",
                                line=dict(dash="dot", color="gray")))
    # calls, not time: a call of a small draft model counts like a target call, so a side above the
    # one-per-call line can still take longer on the clock (the verdict times them)
    _layout(f1, "Tokens against network calls (calls, not clock time)", 1,
            xaxis_title="network calls (count, any model; the verdict above times the clock)",
            yaxis_title="tokens decided (count)")
    _layout(f2, "Tokens decided per round", 1, xaxis_title="round (1 = first)",
            yaxis_title="tokens decided in the round", barmode="group")
    return f1, f2


#: a position's acceptance rate is charted only from this many tested drafts (fewer: one run's
#: 0.17 -> 1 -> 0 zigzag, noise read as a trend)
MIN_TESTED = 20


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of k successes in n trials (95% by default): a proportion's
    interval that stays inside [0, 1] and is honest for small n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The Clopper-Pearson (exact) interval of a binomial proportion k / n."""
    from scipy.stats import beta  # scipy only where an interval is drawn

    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def _label(g) -> str:
    """A group's name in a legend: sampler, model and only the knobs its sampler reads, minus
    temperature at its default (so "mdm" never shows a k it ignores)."""
    t1 = KNOBS["temperature"].default
    knobs = {k: v for k, v in shown_params(g.sampler, g.params).items() if not (k == "temperature" and v == t1)}
    return " · ".join([g.sampler, g.model, *(f"{k}={v}" for k, v in sorted(knobs.items()))])


def stats_figures(groups: list) -> tuple[go.Figure, go.Figure, go.Figure]:
    """The Statistics tab's charts: acceptance by position in the round, tokens per call, and calls
    against masked tokens (a titled empty chart each when no run matches)."""
    if not groups:
        msg = "no stored runs match the filters"
        return (_empty("Acceptance rate by position in the round", msg),
                _empty("Tokens per call", msg), _empty("Calls against masked tokens", msg))
    f1 = go.Figure()
    for g in groups:
        pts = [(r.rank, r.accepted, r.accepted + r.rejected) for r in g.acceptance_by_rank
               if r.accepted + r.rejected >= MIN_TESTED]
        if pts:
            rates = [a / n for _, a, n in pts]
            bounds = [wilson(a, n) for _, a, n in pts]
            f1.add_trace(go.Scatter(
                x=[p[0] for p in pts], y=rates, mode="lines+markers", name=_label(g),
                error_y=dict(type="data", symmetric=False, array=[hi - r for r, (_, hi) in zip(rates, bounds)],
                             arrayminus=[r - lo for r, (lo, _) in zip(rates, bounds)]),
                text=[f"{a} of {n} tested drafts accepted" for _, a, n in pts],
                hovertemplate="position %{x}: %{y:.2f} (%{text})<extra></extra>"))
    rows = (len(groups) + 1) // 2
    _layout(f1, f"Acceptance by draft position (95% interval; positions with {MIN_TESTED}+ tested drafts)", rows,
            xaxis_title="draft position in the round (0 = first draft)",
            yaxis_title="accepted / tested (fraction)", yaxis_range=[0, 1.05], showlegend=True)
    f1.update_xaxes(dtick=1)
    if not f1.data:
        f1.add_annotation(text=f"too few tested drafts to chart: each position needs {MIN_TESTED} or more",
                          showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    f2 = go.Figure()
    for g in groups:
        if g.tokens_per_call:
            n = len(g.tokens_per_call)
            f2.add_trace(go.Box(y=g.tokens_per_call, name=f"{_label(g)} ({n} run{'s' if n != 1 else ''})",
                                boxpoints="all", jitter=0.3))
    _layout(f2, "Tokens per network call, one box per group", 0, yaxis_title="masked tokens per call (tokens)",
            xaxis_title="sampler · model", showlegend=False)
    f2.update_xaxes(tickangle=-20, automargin=True)
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
    _layout(f3, "Network calls against masked tokens, one point per run", (len(groups) + 2) // 3,
            xaxis_title="masked tokens in the run (count)", yaxis_title="network calls (count)")
    return f1, f2, f3
