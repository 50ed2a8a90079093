"""A finished exactness check drawn for the page: the chart of fill frequencies against the exact
law, the table of verdicts and the one-line status. Apart from the tab (app/tabs/exactness.py) because
a check is drawn twice, when it finishes and when a share link replays it from the store, and both
must read the same."""

from __future__ import annotations

import plotly.graph_objects as go

from app.views.plots import _empty, _layout, clopper_pearson
from app.views.render import esc
from engine.exactness.fit import CONSISTENT, NOT_CONSISTENT, UNTESTABLE
from engine.exactness.judgement import CANNOT_TELL
from engine.exactness.result import CheckResult
from engine.exactness.wrong_samplers import WRONG_SAMPLERS

TOP_FILLS = 12  # fills drawn as bars (most likely first); the rest are one "other" group


def figure(res: CheckResult) -> go.Figure:
    """Bars: each sampler's frequency of the likeliest fills and of every other fill, with 95%
    intervals; diamonds: the exact probability."""
    n = res.samples
    likeliest = max(res.exact.values(), default=None)
    if likeliest is not None and likeliest * n < 1:  # no fill expected even once: every bar would be 0 or 1/N
        return _empty("Fills of the span against the exact law",
                      f"No fill of this span is likely enough to show in {n:,} draws (the likeliest has "
                      f"p = {likeliest:.2g}),<br>so fill frequencies cannot be compared here. The table's "
                      "test reads every drawn token's rank under the model instead.")
    top = sorted(res.exact, key=lambda f: -res.exact[f])[:TOP_FILLS]
    labels = [repr(res.texts.get(f, "?"))[1:-1] or "(empty)" for f in top] + ["every other fill"]
    fig = go.Figure()
    for rep in res.samplers:
        ks = [rep.counts.get(f, 0) for f in top]
        ks.append(n - sum(ks))
        fr = [k / n for k in ks]
        ci = [clopper_pearson(k, n) for k in ks]
        fig.add_trace(go.Bar(
            x=labels, y=fr, name=rep.name,
            error_y=dict(type="data", symmetric=False, array=[hi - f for f, (_, hi) in zip(fr, ci)],
                         arrayminus=[f - lo for f, (lo, _) in zip(fr, ci)], thickness=1),
            hovertemplate="%{x}: %{y:.3f}<extra>" + esc(rep.name) + "</extra>"))
    exact = [res.exact[f] for f in top]
    exact.append(max(0.0, 1.0 - sum(exact)))
    fig.add_trace(go.Scatter(x=labels, y=exact, mode="markers", name="exact probability",
                             marker=dict(symbol="diamond", size=11, color="black")))
    _layout(fig, f"Fills of the span: {n} draws per sampler against the exact law", 1 + len(res.samplers) // 4,
            xaxis_title="fill (most likely first)", yaxis_title="probability / frequency", barmode="group")
    return fig


def _where(rep, res: CheckResult) -> str:
    """The masked token whose draws depart most, in words."""
    j = rep.judgement
    if j is None or j.worst_position is None or not j.position_p:
        return "–"
    return f"token {j.worst_position + 1} of {res.masked_tokens} (p = {j.position_p[j.worst_position]:.2g})"


def table_html(res: CheckResult) -> str:
    """One row per sampler: verdict in words, p-value, power against the wrong rules, where it
    departs most, TV on the enumerated cells (when enumerated), calls and time."""
    rows = []
    for rep in res.samplers:
        j = rep.judgement
        said = rep.verdict or UNTESTABLE
        mark = {CONSISTENT: "✓", NOT_CONSISTENT: "✗", CANNOT_TELL: "?"}.get(said, "–")
        wrong = " <em>(deliberately wrong)</em>" if rep.name in WRONG_SAMPLERS else ""
        extra = j.advice if j else (rep.fit.note if rep.fit else "")
        note = f"<br><small>{esc(extra)}</small>" if extra else ""
        power = esc(j.power_words()) if j and j.power else "–"
        tv = f"{rep.fit.tv:.3f}" if rep.fit else "–"
        rows.append(
            f"<tr><td><code>{esc(rep.name)}</code>{wrong}</td><td>{mark} {esc(said)}{note}</td>"
            f"<td>{rep.p_value:.3g}</td><td>{power}</td><td>{esc(_where(rep, res))}</td><td>{tv}</td>"
            f"<td>{rep.calls_per_sample:.2f}</td><td>{1000 * rep.seconds_per_sample:.1f}</td></tr>")
    head = ("<tr><th>sampler</th><th>verdict</th><th>p-value</th><th>power at this N</th><th>departs most at</th>"
            "<th>TV to exact</th><th>calls / sample</th><th>ms / sample</th></tr>")
    j0 = res.samplers[0].judgement if res.samplers else None
    seen = f" It sees {esc(j0.departure)}." if j0 and j0.departure else ""
    auto = f" {esc(res.extra['auto'])}." if res.extra.get("auto") else ""
    took = f", {res.extra['seconds']:.0f} s" if isinstance(res.extra.get("seconds"), (int, float)) else ""
    foot = (f"<p><small>{esc(res.model)}, N = {res.samples} per sampler{took}, seed {res.seed}, "
            f"temperature {res.params.get('temperature', 1.0):g}.{auto} Exact law: {esc(res.law)}. "
            f"Test: {esc(str(res.extra.get('statistic', 'chi-square on the enumerated cells')))}; p below "
            f"{res.alpha:g} reads \"not consistent\". Power: the share of simulated checks of the same N on "
            f"draws of each wrong rule that the test flags.{seen} TV (where the law is enumerated) is measured on "
            f"fills with 5 or more expected draws; an exact sampler shows about {res.tv_noise:.3f} at this N "
            f"from noise alone.</small></p>")
    return f'<table class="tv-recent">{head}{"".join(rows)}</table>{foot}'


def summary(res: CheckResult) -> str:
    """The finished check in one line, each verdict with the samplers it holds for, worst news first.
    "Cannot tell" is its own group and never counted as a failure: at a small N an exact sampler and a
    wrong one may both pass unseen, which is a statement about N, not about the sampler."""
    groups = {v: [r.name for r in res.samplers if (r.verdict or UNTESTABLE) == v]
              for v in (NOT_CONSISTENT, CONSISTENT, CANNOT_TELL, UNTESTABLE)}
    said = "; ".join([f"{verdict}: {', '.join(names)}" for verdict, names in groups.items() if names]
                     + (["the table says what N would tell"] if groups[CANNOT_TELL] or groups[UNTESTABLE] else []))
    return f"Done, N = {res.samples:,} fills per sampler. {said[:1].upper()}{said[1:]}."
