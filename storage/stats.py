"""The Statistics tab's numbers: 'ok' runs grouped per model x sampler x parameters, with the
acceptance per rank and the tokens per round read from the per-run aggregate tables (three
GROUP BY queries, never a pass over the steps)."""

from __future__ import annotations

import json
from datetime import datetime

from sqlalchemy import Engine, func, or_, select
from sqlalchemy.orm import Session

from storage import db
from storage.models import RankStatRow, RoundStatRow, RunRow, SessionRow
from storage.records import GroupStats, RankRate

#: the columns a group is keyed on before the model is decided per run
GROUP_COLUMNS = (SessionRow.model, RunRow.sampler, RunRow.params_key)
Key = tuple[str, str, str]


def _conditions(domain: str | None, model: str | None, sampler: str | None,
                since: datetime | None, until: datetime | None) -> list:
    """The WHERE clauses of the filters (the model is only narrowed here; group_key decides it)."""
    conds = [RunRow.status == "ok"]
    if domain is not None:
        conds.append(SessionRow.domain == domain)
    if model is not None:
        conds.append(or_(SessionRow.model == model, SessionRow.model.contains(model, autoescape=True)))
    if sampler is not None:
        conds.append(RunRow.sampler == sampler)
    if since is not None:
        conds.append(RunRow.created_at >= since)
    if until is not None:
        conds.append(RunRow.created_at < until)
    return conds


def group_key(session_model: str, sampler: str, params_key: str, model: str | None) -> Key | None:
    """The group of a run: the model it really used (its params' "model" when recorded, else the
    session's), its sampler and parameters; None when it is not the model asked for."""
    ran = json.loads(params_key).get("model")
    eff = ran if isinstance(ran, str) and ran else session_model
    if model is not None and eff != model:
        return None
    return eff, sampler, params_key


def _runs(s: Session, conds: list, model: str | None) -> dict[Key, GroupStats]:
    """One GroupStats per group with its run-level totals, runs in id order."""
    groups: dict[Key, GroupStats] = {}
    q = (select(*GROUP_COLUMNS, RunRow.masked_tokens, RunRow.calls, RunRow.rounds)
         .join(SessionRow, RunRow.session_id == SessionRow.id).where(*conds).order_by(*GROUP_COLUMNS, RunRow.id))
    for m, smp, pk, masked, calls, rounds in s.execute(q):
        kk = group_key(m, smp, pk, model)
        if kk is None:
            continue
        g = groups.get(kk)
        if g is None:
            g = groups[kk] = GroupStats(model=kk[0], sampler=smp, params=json.loads(pk), runs=0, masked_tokens=0, calls=0.0,
                                        rounds=0, acceptance_by_rank=[], tokens_per_call=[], tokens_per_round={},
                                        calls_vs_masked=[])
        g.runs += 1
        g.masked_tokens += masked
        g.calls += calls
        g.rounds += rounds
        g.calls_vs_masked.append((masked, calls))
        if calls > 0:
            g.tokens_per_call.append(masked / calls)
    return groups


def _grouped(stat_table, run_ids, *extra):
    """SUM/COUNT of a per-run aggregate table over the selected runs, per group and `extra[0]`."""
    return (
        select(*GROUP_COLUMNS, *extra)
        .select_from(stat_table)
        .join(RunRow, RunRow.id == stat_table.c.run_id)
        .join(SessionRow, RunRow.session_id == SessionRow.id)
        .where(stat_table.c.run_id.in_(select(run_ids.c.id)))
        .group_by(*GROUP_COLUMNS, extra[0])
        .order_by(*GROUP_COLUMNS, extra[0])
    )


def _add_acceptance(s: Session, groups: dict[Key, GroupStats], run_ids, model: str | None) -> None:
    """Fill each group's acceptance_by_rank from rank_stats."""
    rt = RankStatRow.__table__
    by_rank: dict[Key, dict[int, list[int]]] = {}
    for m, smp, pk, rank, acc, rej in s.execute(
        _grouped(rt, run_ids, rt.c.rank, func.sum(rt.c.accepted), func.sum(rt.c.rejected))
    ):
        kk = group_key(m, smp, pk, model)
        if kk is None or kk not in groups:
            continue
        tot = by_rank.setdefault(kk, {}).setdefault(int(rank), [0, 0])
        tot[0] += int(acc)
        tot[1] += int(rej)
    for kk, ranks in by_rank.items():
        groups[kk].acceptance_by_rank.extend(RankRate(r, a, j) for r, (a, j) in sorted(ranks.items()))


def _add_rounds(s: Session, groups: dict[Key, GroupStats], run_ids, model: str | None) -> None:
    """Fill each group's tokens_per_round histogram from round_stats."""
    rd = RoundStatRow.__table__
    for m, smp, pk, tokens, n in s.execute(_grouped(rd, run_ids, rd.c.tokens, func.count())):
        kk = group_key(m, smp, pk, model)
        if kk is None or kk not in groups:
            continue
        tpr = groups[kk].tokens_per_round
        tpr[int(tokens)] = tpr.get(int(tokens), 0) + int(n)


def group_stats(
    engine: Engine, *, domain: str | None = None, model: str | None = None, sampler: str | None = None,
    since: datetime | None = None, until: datetime | None = None,
) -> list[GroupStats]:
    """Statistics of 'ok' runs grouped per model x sampler x parameters (see Store.stats)."""
    conds = _conditions(domain, model, sampler, since, until)
    run_ids = select(RunRow.id).join(SessionRow, RunRow.session_id == SessionRow.id).where(*conds).subquery()
    with db.read_session(engine) as s:
        groups = _runs(s, conds, model)
        _add_acceptance(s, groups, run_ids, model)
        _add_rounds(s, groups, run_ids, model)
    return list(groups.values())
