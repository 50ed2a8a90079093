"""Stored runs and statistics as text: CSV and JSON for downloads and the report. Lossless where
it matters (a trace's CSV cells are JSON arrays, so a trace reads back exactly)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Sequence
from dataclasses import asdict

from engine.trace import Step, StepKind
from storage.records import GroupStats, RunRecord

TRACE_COLUMNS = (
    "seq",
    "kind",
    "round",
    "positions",
    "tokens",
    "texts",
    "p",
    "q",
    "calls",
    "elapsed",
    "note",
    "tested",
)


def trace_to_csv(steps: Sequence[Step]) -> str:
    """One row per step; list cells hold JSON arrays (lossless, and parseable back)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(TRACE_COLUMNS)
    for i, s in enumerate(steps):
        w.writerow(
            [
                i,
                StepKind(s.kind).value,
                s.round,
                *(
                    json.dumps(getattr(s, c))
                    for c in ("positions", "tokens", "texts", "p", "q")
                ),
                repr(float(s.calls)),
                repr(float(s.elapsed)),
                s.note,
                json.dumps(bool(s.tested)),
            ]
        )
    return buf.getvalue()


def trace_to_json(steps: Sequence[Step]) -> str:
    """A JSON array of Step.to_dict() (Step.from_dict reads each back)."""
    return json.dumps([s.to_dict() for s in steps])


def run_to_json(run: RunRecord) -> str:
    """The run's fields and its trace, as one JSON object."""
    d = asdict(run)
    d["created_at"] = run.created_at.isoformat()
    d["steps"] = [s.to_dict() for s in run.steps]
    return json.dumps(d)


def stats_to_json(groups: Sequence[GroupStats]) -> str:
    """The groups with their derived rates and means, as one JSON array (for scripts and the report)."""
    out = []
    for g in groups:
        d = asdict(g)
        d["acceptance_by_rank"] = [
            {
                "rank": r.rank,
                "accepted": r.accepted,
                "rejected": r.rejected,
                "rate": r.rate,
            }
            for r in g.acceptance_by_rank
        ]
        d["tokens_per_round"] = {
            str(k): v for k, v in sorted(g.tokens_per_round.items())
        }
        d["calls_vs_masked"] = [list(x) for x in g.calls_vs_masked]
        d["mean_tokens_per_call"] = g.mean_tokens_per_call
        d["mean_tokens_per_round"] = g.mean_tokens_per_round
        out.append(d)
    return json.dumps(out)


STATS_COLUMNS = ("model", "sampler", "params", "metric", "key", "value", "count")


def stats_to_csv(groups: Sequence[GroupStats]) -> str:
    """Long format, one measurement per row: model, sampler, params, metric, key, value, count.

    metrics: runs, tokens_per_call (pooled), acceptance_rate (key = rank, count = decisions),
    tokens_per_round (key = tokens, count = rounds), run (key = masked tokens, value = calls).
    """
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(STATS_COLUMNS)
    for g in groups:
        head = [g.model, g.sampler, json.dumps(g.params, sort_keys=True)]
        w.writerow([*head, "runs", "", g.runs, ""])
        w.writerow([*head, "tokens_per_call", "", _num(g.mean_tokens_per_call), g.runs])
        for r in g.acceptance_by_rank:
            w.writerow(
                [
                    *head,
                    "acceptance_rate",
                    r.rank,
                    _num(r.rate),
                    r.accepted + r.rejected,
                ]
            )
        for k, v in sorted(g.tokens_per_round.items()):
            w.writerow([*head, "tokens_per_round", k, "", v])
        for masked, calls in g.calls_vs_masked:
            w.writerow([*head, "run", masked, _num(calls), 1])
    return buf.getvalue()


def _num(x: float | None) -> str:
    """A float as exact text ('' for None), so a CSV round trip keeps every digit."""
    return "" if x is None else repr(float(x))
