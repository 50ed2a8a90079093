"""`python -m engine report [--quick]`: the results report, docs/REPORT.md plus PNG figures.

The command line, then the sections in order (a section that fails is reported as failed, never
fatal), the figures exported, the header written from what was measured, the file written.
"""

from __future__ import annotations

import argparse
import shlex
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path

from engine.loading.threads import set_threads

from .. import progress, shard
from . import measure
from .measure import Models
from .plan import DOMAINS, ERROR_MARK, EXACT, log, make_plan
from .provenance import machine_short, section_provenance
from .render import export_figures
from .sections import Report


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m engine report", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few inputs, short windows: minutes, for CI")
    ap.add_argument("--samples", type=int, default=None, help="inputs for section 1 (default 100; quick 2)")
    ap.add_argument("--domains", default=",".join(DOMAINS), help=f"comma-separated: {','.join(DOMAINS)}")
    ap.add_argument("--out", default="docs/REPORT.md", help="markdown file; figures go to figures/ beside it")
    ap.add_argument("--humaneval-limit", type=int, default=None,
                    help="HumanEval tasks (default 100; quick 3; 0 = all 1033)")
    ap.add_argument("--k", type=int, default=5, help="draft length per round")
    ap.add_argument("--samplers", default=None,
                    help=f"exact samplers to measure (sequential always runs; default all: {','.join(EXACT)})")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (of the main process)")
    ap.add_argument("--workers", type=int, default=1,
                    help="processes measuring inputs in parallel in sections 1 and 5 (one torch thread each)")
    ap.add_argument("--scaling-samples", type=int, default=None, help="inputs per point in section 5")
    ap.add_argument("--ss-samples", type=int, default=None, help="inputs for section 3 (self-spec vs MDM)")
    ap.add_argument("--models-dir", default=None,
                    help="take <domain>-<kind> models from this folder only (default: the registry)")
    from engine.cli import add_device_arg

    add_device_arg(ap)
    progress.add_quiet_arg(ap)
    return ap


def _domains(ap: argparse.ArgumentParser, a: argparse.Namespace) -> list[str]:
    """The domains asked for; unknown domains or samplers end the command with a usage error."""
    domains = [d.strip() for d in a.domains.split(",") if d.strip()]
    bad = [d for d in domains if d not in DOMAINS]
    if bad:
        ap.error(f"unknown domain(s) {bad}; choose from {DOMAINS}")
    bad = [s for s in (a.samplers or "").split(",") if s.strip() and s.strip() not in EXACT]
    if bad:
        ap.error(f"unknown sampler(s) {bad}; choose from {EXACT}")
    return domains


def _run_sections(rep: Report) -> list[str]:
    """Sections 1-5 in order, each timed; a failing one becomes an error line."""
    body: list[str] = []
    for title, fn in (("exact", rep.section_exact), ("acceptance", rep.section_acceptance),
                      ("self-spec", rep.section_self_spec), ("humaneval", rep.section_humaneval),
                      ("scaling", rep.section_scaling)):
        t0 = time.time()
        try:
            body += fn()
        except Exception as e:  # noqa: BLE001 - one broken section must not lose the others
            traceback.print_exc()
            body += [f"{ERROR_MARK}: section {title} failed ({type(e).__name__}: {e}).", ""]
        rep.section_seconds[title] = time.time() - t0
        log(f"section {title} done in {rep.section_seconds[title]:.0f} s")
    return body


def _head(rep: Report, command: str, how: str) -> list[str]:
    """Title, the regenerating command, what ran where, and the headlines."""
    head = [
        "# Results",
        "",
        f"Regenerate with: `{command}`",
        "",
        f"Generated {rep.date} on {rep.machine} in {'quick' if rep.plan.quick else 'full'} mode; domains "
        f"{', '.join(rep.domains)}. Figures: {how}. Every number below is measured in this run; numbers from "
        "different runs or machines are not comparable (timings are only compared within one run).",
        "",
    ]
    if rep.plan.quick:
        head += ["**Quick mode:** a handful of short inputs — a smoke test of the pipeline, not evidence. "
                 "Run without `--quick` for the real tables.", ""]
    return head + ["## Headlines", ""] + ([f"- {h}" for h in rep.headlines] or ["- (no measurements)"]) + [""]


def _link_figures(text: str, paths: dict[str, Path], rel_fig: str) -> str:
    for name, p in paths.items():
        rel = f"{rel_fig}/{p.name}"
        link = f"![{name}]({rel})" if p.suffix == ".png" else f"[{name} (interactive HTML)]({rel})"
        text = text.replace(f"{{{{FIG:{name}}}}}", link)
    return text


def cli(argv: list[str]) -> int:
    """Parse the arguments, measure every section, write the markdown and its figures."""
    from engine.cli import apply_device_args

    ap = _parser()
    a = ap.parse_args(argv)
    progress.set_quiet(a.quiet)
    shard.is_main()  # several processes (torchrun / accelerate launch): join them now, one GPU each
    device = apply_device_args(a)  # checked now: a model that fails to load is only noted later
    domains = _domains(ap, a)
    set_threads(a.threads)
    measure.WORKERS = max(1, a.workers)
    started = time.time()
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    machine = machine_short(device, 1 if shard.distributed() else measure.WORKERS) + (
        f", {shard.world()[1]} processes sharing every section's inputs (lab.shard)" if shard.distributed() else "")
    plan = make_plan(a)
    command = "python -m engine report" + ("" if not argv else " " + shlex.join(argv))
    out_path = Path(a.out)
    fig_dir = out_path.parent / "figures"
    models = Models(Path(a.models_dir) if a.models_dir else None)
    rep = Report(plan=plan, models=models, domains=domains, fig_dir=fig_dir, rel_fig="figures", machine=machine, date=date)
    body = _run_sections(rep)
    if not shard.is_main():
        return 0  # every process measured its share of each section's inputs; the main one writes
    t0 = time.time()
    paths, how = export_figures(rep.figures, fig_dir)
    rep.section_seconds["figures"] = time.time() - t0
    lines = _head(rep, command, how) + body + section_provenance(models, plan, command, started, date,
                                                                 rep.section_seconds)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(_link_figures("\n".join(lines), paths, rep.rel_fig) + "\n")
    log(f"wrote {out_path} ({len(paths)} figures, {time.time() - started:.0f} s)")
    print(out_path)
    return 0
