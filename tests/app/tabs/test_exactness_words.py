"""What the Exactness tab says about a finished check, without running one: the status line groups the
samplers by verdict (a "cannot tell" is never read as a failure) and the chart says why it has no bars
when no fill of the span is likely enough to be drawn twice."""

from __future__ import annotations

from app.views.check_result import figure, summary
from engine.exactness.fit import CONSISTENT, NOT_CONSISTENT
from engine.exactness.judgement import CANNOT_TELL, Judgement
from engine.exactness.result import CheckResult, SamplerReport


def _result(verdicts: dict[str, str], exact: dict[tuple[int, ...], float], n: int = 100) -> CheckResult:
    reports = [SamplerReport(name=name, counts={fill: 1 for fill in exact}, calls_per_sample=1.0, seconds_per_sample=0.1,
                             judgement=Judgement(p_value=0.5, statistic="PIT", verdict=v))
               for name, v in verdicts.items()]
    return CheckResult(model="text-asarm", kind="asarm", source="a [MASK:2] b", samples=n, seed=0, params={},
                       masked_tokens=2, exact=exact, texts={f: "x" for f in exact}, samplers=reports, law="chain")


def test_the_status_groups_samplers_by_verdict_and_never_counts_cannot_tell_as_failing():
    res = _result({"a": CANNOT_TELL, "wrong": NOT_CONSISTENT, "b": CONSISTENT, "c": CANNOT_TELL}, {(1, 2): 0.5})
    line = summary(res)
    assert line == ("Done, N = 100 fills per sampler. Not consistent with exact sampling at this N: wrong; "
                    "consistent with exact sampling at this N: b; cannot tell at this N: a, c; "
                    "the table says what N would tell."), line
    assert " of " not in line  # no "0 of 4 consistent" tally that reads a low-power check as failures


def test_a_check_whose_every_verdict_is_consistent_says_only_that():
    line = summary(_result({"a": CONSISTENT, "b": CONSISTENT}, {(1, 2): 0.5}))
    assert line == "Done, N = 100 fills per sampler. Consistent with exact sampling at this N: a, b.", line


def test_the_chart_says_why_it_has_no_bars_when_every_fill_is_rarer_than_one_in_n():
    rare = figure(_result({"a": CONSISTENT}, {(1, 2): 4.7e-11, (3, 4): 1e-12}))
    assert not rare.data, "bars of 0 and 1/N for fills never expected once compare nothing"
    note = rare.layout.annotations[0].text
    assert "likely enough" in note and "100 draws" in note and "4.7e-11" in note, note
    likely = figure(_result({"a": CONSISTENT}, {(1, 2): 0.02, (3, 4): 1e-12}))  # 2 expected in 100 draws
    assert likely.data and not likely.layout.annotations
