"""The Statistics tab: the store's grouped statistics (the model and sampler that really ran,
finished runs only) as a table, three charts and a CSV download, filled when the tab opens."""

from __future__ import annotations

import gradio as gr

from app import choices
from app.examples import DOMAINS
from app.stored.exports import cached_export
from app.stored.store import store
from app.timing import machine_speed
from app.views import plots
from engine.samplers import SAMPLERS
from storage import stats_to_csv

from .common import Page, components, empty_table, guarded, named

#: what Refresh (and the /stats API) updates, in the order API clients receive it
STATS_OUTPUTS = ("fig_acc", "fig_tpc", "fig_cvm", "stats_table", "csv_btn")
STATS_HEADERS = ["model", "sampler", "params", "runs", "masked tokens", "calls", "tokens/call", "tokens/round"]


def _opt(v):
    return None if v in (None, "", "all") else v


def _row(g) -> list[str]:
    tpc, tpr = g.mean_tokens_per_call, g.mean_tokens_per_round
    return [g.model, g.sampler, ", ".join(f"{k}={v}" for k, v in sorted(choices.shown_params(g.sampler, g.params).items())),
            str(g.runs), str(g.masked_tokens), f"{g.calls:g}",
            "" if tpc is None else f"{tpc:.3f}", "" if tpr is None else f"{tpr:.3f}"]


@guarded
def stats(domain, model, sampler):
    """The filtered groups: three figures, the table and the CSV file behind the download button
    (STATS_OUTPUTS, by name)."""
    groups = store().stats(domain=_opt(domain), model=_opt(model), sampler=_opt(sampler))
    f1, f2, f3 = plots.stats_figures(groups)
    rows = [_row(g) for g in groups]
    path = cached_export(("stats", _opt(domain), _opt(model), _opt(sampler)), "infill-stats",
                         lambda: stats_to_csv(groups))  # one file per filter a minute
    table = {"headers": STATS_HEADERS, "data": rows or [[""] * len(STATS_HEADERS)]}
    return {"fig_acc": f1, "fig_tpc": f2, "fig_cvm": f3, "stats_table": table,
            "csv_btn": gr.update(value=path, visible=True)}


@guarded
def stats_filters():
    """The filters' choices: every listed model and every model a stored session used."""
    ms = sorted(set(choices.list_models()) | {s.model for s in store().list_sessions(200)})
    return gr.update(choices=["all", *ms]), gr.update(choices=["all", *SAMPLERS])


def layout(p: Page) -> None:
    """The filters, the table and the charts."""
    with gr.Row():
        p.f_domain = gr.Dropdown(["all", *DOMAINS], value="all", label="Domain")
        p.f_model = gr.Dropdown(["all", *p.init_models], value="all", label="Model", allow_custom_value=True)
        p.f_sampler = gr.Dropdown(["all", *SAMPLERS], value="all", label="Sampler", allow_custom_value=True)
        p.stats_btn = gr.Button("Refresh", variant="primary")
    p.stats_table = gr.Dataframe(value=empty_table(STATS_HEADERS), label="Groups (model and sampler "
                                 "that really ran; finished runs only)", interactive=False,
                                 max_height=300, elem_id="stats-table")
    with gr.Row():
        p.fig_acc = gr.Plot(show_label=False, elem_id="fig-acc")
        p.fig_tpc = gr.Plot(show_label=False, elem_id="fig-tpc")
    p.fig_cvm = gr.Plot(show_label=False, elem_id="fig-cvm")
    p.csv_btn = gr.DownloadButton("Download CSV", visible=False)
    with gr.Row(equal_height=True):
        p.speed_here = gr.Markdown(speed_figures(), elem_id="machine-speed")
        p.measure_btn = gr.Button("Measure this machine", size="sm", scale=0, min_width=180, elem_id="measure")


def speed_figures() -> str:
    """Each domain's default against cached sequential decoding, and where each figure comes from."""
    return "**Speed against cached sequential decoding**\n\n" + "\n\n".join(
        f"- {machine_speed.speed_sentence(d)}" for d in DOMAINS)


def measure_here(domain):
    """Measure this machine (a short `bench assd` of the filtered domain, text when "all"), then
    the figures again; refused while runs compute."""
    d = _opt(domain) or DOMAINS[0]
    yield speed_figures() + f"\n\nMeasuring {d} on this machine (a short `bench assd`, about a minute)…"
    said = machine_speed.measure(d)
    yield speed_figures() + ("" if said == machine_speed.speed_sentence(d) else f"\n\n{said}")


def wire(p: Page) -> None:
    """Refresh, opening the tab and every filter change redraw the statistics; the filters' choices
    are filled when the page loads."""
    filters = [p.f_domain, p.f_model, p.f_sampler]
    outputs, handler = components(p, STATS_OUTPUTS), named(p, stats)
    p.stats_btn.click(handler, filters, outputs, api_name="stats")
    p.stats_tab.select(handler, filters, outputs, api_visibility="private")
    for f in filters:
        f.input(handler, filters, outputs, api_visibility="private")
    p.demo.load(stats_filters, None, [p.f_model, p.f_sampler], api_visibility="private")
    # one at a time; it refuses while runs compute (a measurement beside runs would time both)
    measured = p.measure_btn.click(measure_here, [p.f_domain], [p.speed_here], api_name="measure_machine",
                                   concurrency_id="measure", concurrency_limit=1, show_progress="hidden")
    # the figures are read when the page loads, not when the server built it (a measurement made
    # since then shows after a reload), and the sampler help under the editor follows a measurement
    # at once (it was redrawn only when the sampler changed)
    p.demo.load(speed_figures, None, [p.speed_here], api_visibility="private", queue=False)
    for evt in (p.demo.load, measured.then):
        evt(choices.sampler_help, [p.sampler, p.domain], [p.sampler_help], api_visibility="private",
            queue=False, show_progress="hidden")
