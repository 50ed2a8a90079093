"""One definition of "accepted at position i of the round": Step.tested and
engine.trace.acceptance_by_position, shared by the store's statistics (what the app's Statistics
tab plots) and the report. Drafts kept without a test are never counted as accepted."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.api import InfillRun
from engine.trace import Step, StepKind, acceptance_by_position, trace_counts, untested_accepts
from lab.report.measure import acceptance_events
from storage import open_store
from tests.support.tiny import masked_input


def run(lm, sampler, seed, **kw):
    mi = masked_input(lm.codec, {1: "b"}, 6)
    r = InfillRun(masked_input=mi, model=str(lm.path), sampler=sampler, seed=seed, **kw)
    return list(r.stream())


@pytest.fixture(scope="module")
def traces(tiny_asarm):
    out = {}
    for sampler in ("assd", "assd-pipelined", "assd-ngram"):
        out[sampler] = [run(tiny_asarm, sampler, seed, k=3, temperature=2.0) for seed in range(6)]
    return out


def test_untested_first_drafts_are_not_counted(traces):
    for sampler, ts in traces.items():
        for t in ts:
            by = acceptance_by_position(t)
            counts = trace_counts(t)
            untested = untested_accepts(t)
            assert sum(a for a, _ in by.values()) == counts["accepted"] - untested
            assert sum(r for _, r in by.values()) == counts["rejected"]
            if sampler == "assd":  # every round's first draft is an exact row: never tested
                assert 0 not in by and untested == t[-1].round + 1
            if sampler == "assd-ngram":  # the n-gram drafts are all tested
                assert untested == 0
    # the pipelined sampler keeps exact rows untested only after an all-accepted round
    assert any(untested_accepts(t) for t in traces["assd-pipelined"])


def test_store_report_and_trace_agree(traces, tmp_path):
    st = open_store(f"sqlite:///{tmp_path / 'stats.db'}")
    try:
        sid = st.create_session("text", "tiny-asarm", "x", [])
        want: dict[str, Counter] = {}
        for sampler, ts in traces.items():
            total: Counter = Counter()
            for t in ts:
                st.record_run(sid, sampler, {"k": 3}, 0, t)
                for i, (a, r) in acceptance_by_position(t).items():
                    total[(i, "a")] += a
                    total[(i, "r")] += r
                events, untested = acceptance_events(t)  # the report's view of the same trace
                assert untested == untested_accepts(t)
                assert Counter((i, "a" if acc else "r") for i, acc, _ in events) == Counter(
                    {k: v for k, v in acceptance_by_position_flat(t).items() if v})
            want[sampler] = total
        for g in st.stats():  # what the app's Statistics tab reads
            got = Counter()
            for r in g.acceptance_by_rank:
                got[(r.rank, "a")] += r.accepted
                got[(r.rank, "r")] += r.rejected
            assert +got == +want[g.sampler], g.sampler
        assert {g.sampler for g in st.stats()} == set(traces)
    finally:
        st.close()


def acceptance_by_position_flat(t) -> Counter:
    c: Counter = Counter()
    for i, (a, r) in acceptance_by_position(t).items():
        c[(i, "a")] += a
        c[(i, "r")] += r
    return c


def test_stored_steps_keep_the_flag(traces, tmp_path):
    st = open_store(f"sqlite:///{tmp_path / 'flag.db'}")
    try:
        sid = st.create_session("text", "tiny-asarm", "x", [])
        t = traces["assd"][0]
        st.record_run(sid, "assd", {"k": 3}, 0, t)
        stored = st.get_session(sid).runs[0].steps
        assert [s.tested for s in stored] == [s.tested for s in t]
        assert any(not s.tested for s in stored if s.kind == StepKind.ACCEPT)
    finally:
        st.close()


def test_legacy_dicts_and_migration_infer_the_flag(tmp_path):
    """Traces saved before the flag: from_dict and migration 0003 infer it from the old notes, and
    the migration recomputes rank_stats without the untested first drafts."""
    import sqlalchemy as sa

    from storage import db as sdb

    old = Step(
        kind=StepKind.ACCEPT, round=0, positions=[1], tokens=[5], texts=["x"], p=[0.5], q=[0.5], note="first draft"
    ).to_dict()
    del old["tested"]
    assert Step.from_dict(old).tested is False
    old["note"] = ""
    assert Step.from_dict(old).tested is True

    url = f"sqlite:///{tmp_path / 'old.db'}"
    st = open_store(url)
    sid = st.create_session("text", "tiny-asarm", "x", [])
    trace = [Step(kind=StepKind.DRAFT, round=0, positions=[1, 2, 3], tokens=[5, 6, 7], texts=["a", "b", "c"], p=[0.5] * 3,
                  q=[None] * 3),
             Step(kind=StepKind.ACCEPT, round=0, positions=[1], tokens=[5], texts=["a"], p=[0.5], q=[0.5], note="first draft",
                  tested=False),
             Step(kind=StepKind.ACCEPT, round=0, positions=[2], tokens=[6], texts=["b"], p=[0.5], q=[0.4]),
             Step(kind=StepKind.REJECT, round=0, positions=[3], tokens=[7], texts=["c"], p=[0.5], q=[0.1])]
    st.record_run(sid, "assd", {"k": 3}, 0, trace)
    st.close()
    engine = sdb.make_engine(url)
    sdb.downgrade(engine, "0001")  # back to the schema before the flag, with the old statistics
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM rank_stats"))
        conn.execute(sa.text("INSERT INTO rank_stats (run_id, rank, accepted, rejected) "
                             "SELECT id, 0, 1, 0 FROM runs UNION ALL SELECT id, 1, 1, 0 FROM runs "
                             "UNION ALL SELECT id, 2, 0, 1 FROM runs"))
    engine.dispose()
    st = open_store(url)  # upgrades to head
    try:
        g = st.stats()[0]
        assert [(r.rank, r.accepted, r.rejected) for r in g.acceptance_by_rank] == [(1, 1, 0), (2, 0, 1)]
        assert [s.tested for s in st.get_session(sid).runs[0].steps] == [True, False, True, True]
    finally:
        st.close()
