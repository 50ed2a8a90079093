"""A real sampler trace goes into the store and comes back equal, with the derived counts."""

from engine.api import InfillRun
from engine.trace import trace_counts
from storage import open_store
from tests.support.tiny import masked_input


def test_real_trace_round_trip(tiny_asarm, tmp_path):
    store = open_store(f"sqlite:///{tmp_path / 'db.sqlite'}")
    mi = masked_input(tiny_asarm.codec, {0: "a"}, 6)
    run = InfillRun(masked_input=mi, model=str(tiny_asarm.path), sampler="assd-pipelined", k=3, seed=11,
                    temperature=2.0)
    steps = list(run.stream())
    res = run.result()
    sid = store.create_session("text", res.model, res.source or "a[MASK:5]", [s.to_dict() for s in res.spans])
    run_id = store.record_run(sid, res.sampler, res.params, res.seed, steps, completed_text=res.text,
                              masked_tokens=res.masked_tokens, wall_seconds=res.seconds, logprob=res.log_prob)
    got = store.get_session(sid)
    assert got is not None and len(got.runs) == 1
    stored = got.runs[0]
    assert stored.id == run_id and stored.status == "ok"
    assert stored.steps == steps
    counts = trace_counts(steps)
    assert stored.calls == counts["calls"] and stored.rounds == counts["rounds"]
    assert stored.completed_text == res.text and stored.logprob == res.log_prob
    decisions = (stored.accepted, stored.rejected, stored.resampled)
    assert decisions == (counts["accepted"], counts["rejected"], counts["resampled"])
