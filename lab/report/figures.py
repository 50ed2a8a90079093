"""The report's plotly figures, built from analysed values (render.export_figures writes them)."""

from __future__ import annotations

from .render import PALETTE


def acceptance_figure(domain: str, k: int, rates: list[dict]):
    """ASSD's measured acceptance against the predicted 1 - TV(p, q), by position in the round."""
    import plotly.graph_objects as go

    fig = go.Figure()
    xs = [r["pos"] for r in rates]
    fig.add_trace(go.Scatter(x=xs, y=[r["m"] for r in rates], mode="markers", name="measured acceptance",
                             error_y={"type": "data", "array": [r["mse"] for r in rates]}))
    fig.add_trace(go.Scatter(x=xs, y=[r["pm"] for r in rates], mode="lines+markers", name="predicted 1 − TV(p, q)",
                             error_y={"type": "data", "array": [r["pse"] for r in rates]}))
    fig.update_layout(title=f"{domain}: ASSD acceptance by position in round (k = {k})",
                      xaxis_title="position in round", yaxis_title="acceptance rate", xaxis_dtick=1,
                      yaxis_range=[0, 1.05], template="plotly_white", width=900, height=500)
    return fig


def self_spec_figure(domain: str, an: dict, title: str):
    """Quality (the matched metric) and entropy against calls, MDM and self-spec side by side."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    primary = an["primary"]
    fig = make_subplots(rows=1, cols=2, subplot_titles=(primary, "unigram entropy (bits)"))
    for s in ("mdm", "self-spec"):
        pts = sorted(((d["calls"], d.get(primary, float("nan")), d["entropy"], st)
                      for (ss, st), d in an["settings"].items() if ss == s), key=lambda t: t[0])
        if not pts:
            continue
        xs = [t[0] for t in pts]
        color = PALETTE[0 if s == "mdm" else 1]
        fig.add_trace(go.Scatter(x=xs, y=[t[1] for t in pts], mode="lines+markers+text", name=s,
                                 text=[t[3] for t in pts], textposition="top center", legendgroup=s,
                                 line={"color": color}), row=1, col=1)
        fig.add_trace(go.Scatter(x=xs, y=[t[2] for t in pts], mode="lines+markers", name=s,
                                 text=[t[3] for t in pts], legendgroup=s, showlegend=False,
                                 line={"color": color}), row=1, col=2)
    fig.update_xaxes(type="log", title_text="network calls (full-pass units, MDM best case)")
    fig.update_layout(title=f"{domain}: quality against calls, {title}", template="plotly_white", width=1100,
                      height=480)
    return fig


def scaling_figure():
    """The empty 2 x 2 grid (calls, seconds) x (length, mask rate) that add_scaling_traces fills."""
    from plotly.subplots import make_subplots

    return make_subplots(rows=2, cols=2, subplot_titles=("calls vs length", "seconds vs length",
                                                         "calls vs mask rate", "seconds vs mask rate"))


def add_scaling_traces(fig, row: int, label: str, color_index: int, xs: list, curve: dict) -> None:
    """One sampler's calls and seconds along one sweep (row 1: length, row 2: mask rate)."""
    import plotly.graph_objects as go

    xplot = [x for x, c in zip(xs, curve["cells"]) if c]
    color = PALETTE[color_index % len(PALETTE)]
    fig.add_trace(go.Scatter(x=xplot, y=curve["calls"], mode="lines+markers", name=label, legendgroup=label,
                             line={"color": color}, showlegend=row == 1), row=row, col=1)
    fig.add_trace(go.Scatter(x=xplot, y=curve["seconds"], mode="lines+markers", name=label, legendgroup=label,
                             line={"color": color}, showlegend=False), row=row, col=2)


def finish_scaling_figure(fig, domain: str, model_name: str):
    """Axis titles and the figure title."""
    fig.update_xaxes(title_text="sequence length (tokens)", row=1)
    fig.update_xaxes(title_text="mask rate", row=2)
    fig.update_layout(title=f"{domain}: cost against length and masking rate ({model_name})",
                      template="plotly_white", width=1100, height=800)
    return fig
