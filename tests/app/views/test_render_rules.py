"""The trace view's rules (app/views/render.py), fast and without a model.

Escaping: every string that reaches the HTML is escaped, whatever role its token has: typed context, a
draft, a draft discarded untested (its faded ghost), a rejected draft, a decided token, a hover note, a
title and a message. Hostile strings are pushed through each role and looked for unescaped.

Folding: hand-built Step traces are applied to a TraceState and its fields (roles, texts, token ids,
the round's detail rows, hover info, ghosts, rejected drafts, rounds, counters) and the HTML spans
(class, data attributes, hover text, shown text) are compared with values written out by hand. These
tests are render.py's selection in tests/mutation/run.py (issue 29)."""

from __future__ import annotations

from app.views.render import fold, view_html
from engine.trace import Step, StepKind

EVIL = ['<script>alert("c")</script>', "<b>d</b>&amp;", "<img src=x onerror=e>", "<i>'r'</i>", "\"><u>k</u>"]


def step(kind, rnd, positions, texts, p=None, q=None, note="") -> Step:
    n = len(positions)
    return Step(kind=kind, round=rnd, positions=positions, tokens=list(range(10, 10 + n)), texts=texts,
                p=p or [0.5] * n, q=q or [0.25] * n, calls=float(rnd + 1), elapsed=0.1, note=note, tested=True)


def trace() -> list[Step]:
    return [
        step(StepKind.DRAFT, 0, [1, 2, 3], [EVIL[1], EVIL[2], EVIL[3]]),
        step(StepKind.ACCEPT, 0, [1], [EVIL[1]], note="<em>n</em>"),
        step(StepKind.REJECT, 0, [2], [EVIL[2]]),
        step(StepKind.RESAMPLE, 0, [2], [EVIL[4]], p=[None]),
        # round 1: position 3's draft was never tested; it is discarded and shown as a ghost
        step(StepKind.DRAFT, 1, [4], ["x"]),
    ]


def assert_escaped(html: str) -> None:
    for s in EVIL + ["<em>n</em>"]:
        assert s not in html
    for tag in ("<script", "<b>", "<img", "<i>", "<u>", "<em>"):
        assert tag not in html, tag


def test_every_role_is_escaped():
    st = fold([EVIL[0], "\u2581", "\u2581", "\u2581", "\u2581"], [1, 2, 3, 4], trace())
    assert st.roles == ["context", "accepted", "resampled", "masked", "drafted"]
    assert 3 in st.ghosts and 2 in st.rejected  # the discarded draft and the rejected one are shown
    html = view_html(st, title='<h1 id="t">T</h1>')
    assert_escaped(html)
    assert "&lt;h1 id=&quot;t&quot;&gt;T&lt;/h1&gt;" in html
    assert "&lt;script&gt;alert(&quot;c&quot;)&lt;/script&gt;" in html  # context
    assert "&lt;b&gt;d&lt;/b&gt;&amp;amp;" in html  # accepted
    assert 'data-role="discarded"' in html and "&lt;i&gt;&#x27;r&#x27;&lt;/i&gt;" in html  # the ghost
    assert 'data-role="rejected"' in html and "&lt;img src=x onerror=e&gt;" in html  # the rejected draft
    assert "&quot;&gt;&lt;u&gt;k&lt;/u&gt;" in html  # the resampled token


def test_each_hostile_string_alone():
    """One role at a time, so a single missing escape cannot hide behind another role's text."""
    cases = [
        ([EVIL[0], "\u2581"], [1], [step(StepKind.DRAFT, 0, [1], ["a"])]),
        (["c", "\u2581"], [1], [step(StepKind.DRAFT, 0, [1], [EVIL[0]])]),
        (["c", "\u2581"], [1], [step(StepKind.DRAFT, 0, [1], ["a"]), step(StepKind.ACCEPT, 0, [1], [EVIL[0]])]),
        (["c", "\u2581", "\u2581"], [1, 2], [step(StepKind.DRAFT, 0, [1, 2], ["a", "b"]),
                                             step(StepKind.REJECT, 0, [1], [EVIL[0]]),
                                             step(StepKind.RESAMPLE, 0, [1], ["z"], p=[None])]),
        (["c", "\u2581", "\u2581"], [1, 2], [step(StepKind.DRAFT, 0, [1, 2], ["a", EVIL[0]]),
                                             step(StepKind.ACCEPT, 0, [1], ["a"]),
                                             step(StepKind.DRAFT, 1, [1], ["b"])]),
    ]
    for texts, masked, steps in cases:
        html = view_html(fold(texts, masked, steps))
        assert "<script" not in html and "&lt;script&gt;" in html, html
    assert "<script" not in view_html(None, message=EVIL[0]) and "&lt;script&gt;" in view_html(None, message=EVIL[0])


# ---------------------------------------------------------------------------------------------------
# The folding rules, step by step, against states written out by hand.
#
# MAIN: 8 positions, 6 masked (0, 2, 3, 4, 5, 7), context "a" at 1 and "<z>" at 6. Round 0 drafts every
# masked position; position 0's draft is kept untested (the round's first draft), 2 is accepted by the
# test, 3 and 5 are rejected (3 had p = 0) and resampled, 4 and 7 stay undecided. Round 1 discards the
# drafts at 4 and 7 (ghosts), redraws 4 and accepts it with a p that differs from the draft's. Round 2
# decides 7 with a free bonus token, straight from the ghost.

from app.views.render import (  # noqa: E402
    PARTIAL_CALLS,
    ROLES,
    TraceState,
    _f,
    _pad,
    counters_md,
    legend_html,
    show_token,
    tokens_html,
)

M = "\u2581"  # what a masked position shows
TEXTS = ["[M]", "a", "[M]", "[M]", "[M]", "[M]", "<z>", "[M]"]
MASKED = [0, 2, 3, 4, 5, 7]
D, A, R = StepKind.DRAFT, StepKind.ACCEPT, StepKind.REJECT


def S(kind, rnd, positions=(), tokens=(), texts=(), p=(), q=(), calls=0.0, elapsed=0.0, note="", tested=True):
    return Step(kind=kind, round=rnd, positions=list(positions), tokens=list(tokens), texts=list(texts),
                p=list(p), q=list(q), calls=calls, elapsed=elapsed, note=note, tested=tested)


MAIN = [
    S(StepKind.DRAFT_PASS, 0, calls=1, elapsed=0.25),  # 1
    S(D, 0, [0, 2, 3, 4, 5, 7], [10, 12, 13, 14, 15, 17], ["b", "c", "d", "e", "f", "<g>"],
      [0.0004567, 0.25, 0.0, 0.5, 0.8, 0.125], calls=1, elapsed=0.25, note="draft"),  # 2
    S(StepKind.DENSITY_PASS, 0, calls=2, elapsed=0.5),  # 3
    S(A, 0, [0], [10], ["b"], [None], [0.45], calls=2, elapsed=0.5, note="first draft", tested=False),  # 4
    S(A, 0, [2], [12], ["c"], [None], [0.75], calls=2, elapsed=0.5),  # 5
    # -1 and 99 lie outside the input: skipped, the rest of the step still applies
    S(R, 0, [3, -1, 99, 5], [13, 0, 0, 15], ["d", "?", "?", "f"], [None] * 4, [0.3, 0.1, 0.1, 0.2],
      calls=2, elapsed=0.5, note="reject"),  # 6
    S(StepKind.RESAMPLE, 0, [3, 5], [23, 25], ["D", "F"], [None, 0.35], [0.6, 0.7], calls=2, elapsed=0.5),  # 7
    S(StepKind.DRAFT_PASS, 1, calls=3, elapsed=1.0),  # 8
    S(D, 1, [4], [24], ["E"], [0.9], calls=3, elapsed=1.0),  # 9
    S(A, 1, [4], [24], ["E"], [0.6], [0.3], calls=4, elapsed=2.0, note="ok"),  # 10
    S(StepKind.BONUS, 2, [7], [27], ["G"], [None], [0.95], calls=5, elapsed=2.5),  # 11
]


def drafted_info(p, rnd=0):
    return {"p": p, "q": None, "round": rnd, "tested": False, "outcome": "drafted"}


def test_drafts_are_shown_with_their_proposal_probability():
    st = fold(TEXTS, MASKED, MAIN, upto=2)
    assert st.roles == ["drafted", "context", "drafted", "drafted", "drafted", "drafted", "context", "drafted"]
    assert st.texts == ["b", "a", "c", "d", "e", "f", "<z>", "<g>"]
    assert st.cur == [10, None, 12, 13, 14, 15, None, 17]
    assert st.detail == [[0, "b", "0.000457", "", "", "drafted"], [2, "c", "0.2500", "", "", "drafted"],
                         [3, "d", "0.0000", "", "", "drafted"], [4, "e", "0.5000", "", "", "drafted"],
                         [5, "f", "0.8000", "", "", "drafted"], [7, "<g>", "0.1250", "", "", "drafted"]]
    assert st.info == {0: drafted_info(0.0004567), 2: drafted_info(0.25), 3: drafted_info(0.0),
                       4: drafted_info(0.5), 5: drafted_info(0.8), 7: drafted_info(0.125)}
    assert (st.round, st.decided, st.calls, st.elapsed, st.steps_seen, st.last_note) == (0, 0, 1.0, 0.25, 2, "draft")
    assert st.ghosts == {} and st.rejected == {} and st.round_of == {}


def test_round_zero_decisions():
    st = fold(TEXTS, MASKED, MAIN, upto=7)
    assert st.roles == ["accepted", "context", "accepted", "resampled", "drafted", "resampled", "context", "drafted"]
    assert st.texts == ["b", "a", "c", "D", "e", "F", "<z>", "<g>"]
    assert st.cur == [10, None, 12, 23, 14, 25, None, 17]
    assert st.detail == [
        [0, "b", "0.000457", "0.4500", "", "kept untested (first draft)"],  # p from the draft, no test
        [2, "c", "0.2500", "0.7500", "1.0000", "accepted"],  # min(1, 0.75 / 0.25)
        [3, "d", "0.0000", "0.3000", "", "rejected"],  # p = 0: no ratio
        [4, "e", "0.5000", "", "", "drafted"],
        [5, "f", "0.8000", "0.2000", "0.2500", "rejected"],
        [7, "<g>", "0.1250", "", "", "drafted"],
        [3, "D", "", "0.6000", "", "resampled"],  # a resample's missing p is not the draft's
        [5, "F", "0.3500", "0.7000", "", "resampled"],
    ]
    assert st.info == {
        0: {"p": None, "q": 0.45, "round": 0, "tested": False, "outcome": "accepted", "note": "first draft"},
        2: {"p": 0.25, "q": 0.75, "round": 0, "tested": True, "outcome": "accepted", "note": ""},
        3: {"p": None, "q": 0.6, "round": 0, "tested": False, "outcome": "resampled", "note": ""},
        4: drafted_info(0.5),
        5: {"p": None, "q": 0.7, "round": 0, "tested": False, "outcome": "resampled", "note": ""},
        7: drafted_info(0.125),
    }
    assert st.rejected == {3: "d", 5: "f"} and st.rejected_round == {3: 0, 5: 0} and st.rejected_ids == {3: 13, 5: 15}
    assert st.round_of == {0: 0, 2: 0, 3: 0, 5: 0}
    assert (st.round, st.decided, st.calls, st.elapsed, st.steps_seen, st.last_note) == (0, 4, 2.0, 0.5, 7, "reject")


def test_rejected_drafts_before_their_resample():
    st = fold(TEXTS, MASKED, MAIN, upto=6)
    assert st.roles == ["accepted", "context", "accepted", "rejected", "drafted", "rejected", "context", "drafted"]
    assert st.texts == ["b", "a", "c", "d", "e", "f", "<z>", "<g>"]
    assert st.cur == [10, None, 12, None, 14, None, None, 17]
    assert st.info[3] == {"p": 0.0, "q": 0.3, "round": 0, "tested": True, "outcome": "rejected"}
    assert st.info[5] == {"p": 0.8, "q": 0.2, "round": 0, "tested": True, "outcome": "rejected"}
    assert st.decided == 2 and st.round_of == {0: 0, 2: 0}


def test_a_new_round_discards_undecided_drafts_as_ghosts():
    st = fold(TEXTS, MASKED, MAIN, upto=8)
    assert st.round == 1 and st.detail == []
    assert st.roles == ["accepted", "context", "accepted", "resampled", "masked", "resampled", "context", "masked"]
    assert st.texts == ["b", "a", "c", "D", M, "F", "<z>", M]
    assert st.cur == [10, None, 12, 23, None, 25, None, None]
    assert st.ghosts == {4: ("e", 14), 7: ("<g>", 17)}
    assert st.ghost_text(7) == "<g>"
    assert st.info[4] == drafted_info(0.5)  # the hover text still tells the discarded draft's story
    assert (st.calls, st.elapsed, st.steps_seen, st.last_note, st.decided) == (3.0, 1.0, 8, "reject", 4)


def test_redrawn_and_accepted_in_round_one():
    st = fold(TEXTS, MASKED, MAIN, upto=9)
    assert st.ghosts == {7: ("<g>", 17)} and st.roles[4] == "drafted" and st.texts[4] == "E"
    assert st.info[4] == drafted_info(0.9, 1)
    assert st.detail == [[4, "E", "0.9000", "", "", "drafted"]]
    st.apply(MAIN[9])
    # the step's own p (0.6) wins over the draft's (0.9); the row replaces the draft's row
    assert st.detail == [[4, "E", "0.6000", "0.3000", "0.5000", "accepted (ok)"]]
    assert st.info[4] == {"p": 0.6, "q": 0.3, "round": 1, "tested": True, "outcome": "accepted", "note": "ok"}
    assert st.roles[4] == "accepted" and st.round_of[4] == 1 and st.decided == 5
    assert (st.calls, st.elapsed, st.steps_seen, st.last_note) == (4.0, 2.0, 10, "ok")


def test_a_bonus_decides_a_ghost_directly():
    st = fold(TEXTS, MASKED, MAIN)
    assert st.round == 2 and st.ghosts == {}
    assert st.roles == ["accepted", "context", "accepted", "resampled", "accepted", "resampled", "context", "bonus"]
    assert st.texts == ["b", "a", "c", "D", "E", "F", "<z>", "G"]
    assert st.cur == [10, None, 12, 23, 24, 25, None, 27]
    assert st.detail == [[7, "G", "", "0.9500", "", "bonus"]]
    assert st.info[7] == {"p": None, "q": 0.95, "round": 2, "tested": False, "outcome": "bonus", "note": ""}
    assert st.round_of == {0: 0, 2: 0, 3: 0, 5: 0, 4: 1, 7: 2}
    assert st.decided == 6 and st.steps_seen == 11 and st.display_texts() == st.texts
    assert st.counters() == {"calls": 5.0, "rounds": 3, "decided": 6, "masked": 6, "tokens_per_call": 1.2,
                             "seconds": 2.5, "tokens_per_second": 2.4}
    assert counters_md(st) == ("**calls** 5 · **rounds** 3 · **tokens** 6/6 · **tokens/call** 1.20"
                               " · **seconds** 2.50 · **tokens/s** 2.4")
    assert counters_md(st, "done") == counters_md(st) + " · done"


def test_counters_before_any_step_and_without_time():
    st = fold(TEXTS, MASKED, [])
    assert st.roles == ["masked", "context", "masked", "masked", "masked", "masked", "context", "masked"]
    assert st.texts == [M, "a", M, M, M, M, "<z>", M] and st.cur == [None] * 8
    assert st.counters() == {"calls": 0.0, "rounds": 0, "decided": 0, "masked": 6, "tokens_per_call": None,
                             "seconds": 0.0, "tokens_per_second": None}
    assert counters_md(st) == "**calls** 0 · **rounds** 0 · **tokens** 0/6 · **tokens/call** – · **seconds** 0.00"
    assert counters_md(None, "waiting") == "waiting" and counters_md(None) == ""
    # half a second, fractional calls: the rate is decided / seconds (not shown without time)
    st = fold(["[M]", "[M]"], [0, 1], [S(StepKind.SAMPLE, 0, [0], [1], ["x"], calls=2.5, elapsed=0.5)])
    assert st.counters()["tokens_per_second"] == 2.0 and st.tokens_per_call == 0.4
    assert counters_md(st, "") == (f"**calls** 2.50 {PARTIAL_CALLS} · **rounds** 1 · **tokens** 1/2 · **tokens/call** 0.40"
                                   " · **seconds** 0.50 · **tokens/s** 2.0")
    st = fold(["[M]", "[M]"], [0, 1], [S(StepKind.SAMPLE, 0, [0], [1], ["x"], calls=2 / 3)])
    assert counters_md(st).startswith(f"**calls** 0.67 {PARTIAL_CALLS} · "), "a third of a pass: two decimals"
    st = fold(["[M]"], [0], [S(StepKind.SAMPLE, 0, [0], [1], ["x"], calls=1, elapsed=0.0)])
    assert st.counters()["tokens_per_second"] is None and "tokens/s" not in counters_md(st)


def test_fold_upto_applies_only_that_many_steps():
    assert fold(TEXTS, MASKED, MAIN, upto=0).steps_seen == 0
    assert fold(TEXTS, MASKED, MAIN, upto=3).steps_seen == 3
    assert fold(TEXTS, MASKED, MAIN, upto=None).steps_seen == len(MAIN)


def test_decision_rules_in_corner_cases():
    t, m = ["[M]", "[M]", "[M]", "c"], [0, 1, 2]
    st = fold(t, m, [S(D, 0, [0, 1], [5, 6], ["a", "b"], [0.5, 0.4]),
                     S(D, 0, [1], [7], ["b2"], [0.6]),  # a redraw in the same round replaces the draft
                     S(D, 0, [3], [8], ["x"], [0.7]),  # a draft over context changes nothing shown
                     ])
    assert st.roles == ["drafted", "drafted", "masked", "context"] and st.texts == ["a", "b2", M, "c"]
    assert st.info[1] == drafted_info(0.6) and 3 not in st.info
    assert st.detail[-2:] == [[1, "b2", "0.6000", "", "", "drafted"], [3, "x", "0.7000", "", "", "drafted"]]
    # two rejects in one step; the second's text differs from its draft: its row is added, not replaced
    st.apply(S(R, 0, [1, 0], [7, 9], ["b2", "zz"], [None, None], [0.3, 0.1]))
    assert st.roles[:2] == ["rejected", "rejected"] and st.rejected == {1: "b2", 0: "zz"}
    # (the first draft's row at 1 stays: the redraw got its own row, which the reject replaces)
    assert st.detail == [[0, "a", "0.5000", "", "", "drafted"], [1, "b", "0.4000", "", "", "drafted"],
                         [1, "b2", "0.6000", "0.3000", "0.5000", "rejected"], [3, "x", "0.7000", "", "", "drafted"],
                         [0, "zz", "0.5000", "0.1000", "0.2000", "rejected"]]
    # an accept at a position never drafted this round, p unknown: no ratio, no crash
    st.apply(S(A, 0, [2], [4], ["n"], [None], [0.5]))
    assert st.detail[-1] == [2, "n", "", "0.5000", "", "accepted"]
    assert st.info[2] == {"p": None, "q": 0.5, "round": 0, "tested": True, "outcome": "accepted", "note": ""}
    # a tested accept with its own p keeps it (not the draft's); q missing: no ratio
    st.apply(S(A, 0, [1], [7], ["b2"], [0.2], [None]))
    assert st.detail[2] == [1, "b2", "0.2000", "", "", "accepted"]
    # an untested accept whose p is given still shows the draft's p and no ratio
    st.apply(S(A, 0, [0], [9], ["zz"], [0.9], [0.1], tested=False))
    assert st.detail[-1] == [0, "zz", "0.5000", "0.1000", "", "kept untested"] and len(st.detail) == 7
    assert st.info[0] == {"p": None, "q": 0.1, "round": 0, "tested": False, "outcome": "accepted", "note": ""}
    assert st.decided == 3
    # deciding an already decided position again does not count it twice; a resample is never "tested"
    st.apply(S(StepKind.RESAMPLE, 0, [2], [3], ["r"], [0.3], [0.4], tested=True))
    assert st.decided == 3 and st.roles[2] == "resampled"
    assert st.info[2] == {"p": None, "q": 0.4, "round": 0, "tested": False, "outcome": "resampled", "note": ""}
    assert st.detail[-1] == [2, "r", "0.3000", "0.4000", "", "resampled"]
    # a kind the view does not know changes nothing but the counters
    before = (list(st.roles), list(st.texts), [list(r) for r in st.detail], dict(st.info))
    st.apply(Step(kind="mystery", round=0, positions=[0, 1], tokens=[1, 1], texts=["u", "v"], calls=9.0))
    assert (st.roles, st.texts, st.detail, st.info) == before and st.calls == 9.0


def test_draft_at_first_and_last_positions_and_past_the_end():
    st = fold(["[M]", "[M]"], [0, 1], [S(D, 0, [0, 1, 2], [1, 2, 3], ["a", "b", "c"], [0.5, 0.5, 0.5])])
    assert st.roles == ["drafted", "drafted"] and st.texts == ["a", "b"]
    assert [r[0] for r in st.detail] == [0, 1, 2]
    st = fold(["[M]", "[M]"], [0, 1], [S(StepKind.REVEAL, 0, [0, 2], [1, 3], ["a", "c"])])
    assert st.roles == ["sampled", "masked"] and st.decided == 1
    assert st.detail == [[0, "a", "", "", "", "sampled"]]
    # a masked index past the end of the text is ignored
    st = TraceState(token_texts=["a"], masked=[1], ids=[5])
    assert st.roles == ["context"] and st.cur == [5]


def test_number_format():
    assert _f(None) == "" and _f(0) == "0.0000" and _f(0.0) == "0.0000" and _f(1.0) == "1.0000"
    assert _f(0.5) == "0.5000" and _f(0.001) == "0.0010" and _f(0.0001234) == "0.000123"
    assert _f(-0.0002) == "-0.0002" and _f(0.999) == "0.9990"
    assert _pad([1], ["a", "b", "c"]) == [1, None, None] and _pad([1, 2], ["a", "b"]) == [1, 2]
    assert show_token("") == "\u2205" and show_token(" ") == " " and show_token("\n") == "\n"


# --- HTML, read back span by span ------------------------------------------------------------------

from html.parser import HTMLParser  # noqa: E402


class Spans(HTMLParser):
    """Every span of the tokens view as (attributes, text), and the title div's text."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.spans, self.title, self._cur, self._in_title, self.divs = [], None, None, False, []
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        if tag == "span":
            self._cur = [dict(attrs), ""]
        elif tag == "div":
            self.divs.append(dict(attrs).get("class"))
            self._in_title = dict(attrs).get("class") == "tv-title"
            if self._in_title:
                self.title = ""

    def handle_endtag(self, tag):
        if tag == "span" and self._cur is not None:
            self.spans.append((self._cur[0], self._cur[1]))
            self._cur = None
        elif tag == "div":
            self._in_title = False

    def handle_data(self, data):
        if self._cur is not None:
            self._cur[1] += data
        elif self._in_title:
            self.title += data


def span(cls, pos, role, title, text, rnd=None):
    a = {"class": cls, "data-pos": str(pos), "data-role": role}
    if rnd is not None:
        a["data-round"] = str(rnd)
    a["title"] = title
    return (a, text)


def tokens(html: str) -> list:
    return Spans(html).spans


TESTED = "tested by the speculative test"
ACC = "acceptance probability min(1, q/p)"


def test_html_of_round_one():
    st = fold(TEXTS, MASKED, MAIN, upto=10)
    html = tokens_html(st)
    assert html.startswith('<div class="tv-wrap"><span ') and html.endswith("</span></div>")
    assert tokens(html) == [
        span("tv-tok tv-accepted tv-r0", 0, "accepted", "position 0: accepted · round 1 · q (target) 0.4500 · kept "
             "without a test: its proposal already was the exact target (first draft)", "b", 0),
        span("tv-tok tv-context", 1, "context", "position 1: text you typed", "a"),
        span("tv-tok tv-accepted tv-r0", 2, "accepted", "position 2: accepted · round 1 · p (proposal) 0.2500 · "
             f"q (target) 0.7500 · {ACC} 1.0000 · {TESTED}", "c", 0),
        span("tv-tok tv-rejected tv-rej tv-faded", 3, "rejected", "rejected draft at 3, round 1", "d"),
        span("tv-tok tv-resampled tv-r0", 3, "resampled", "position 3: resampled · round 1 · q (target) 0.6000 · "
             "not tested", "D", 0),
        span("tv-tok tv-accepted tv-r1", 4, "accepted", "position 4: accepted · round 2 · p (proposal) 0.6000 · "
             f"q (target) 0.3000 · {ACC} 0.5000 · {TESTED}", "E", 1),
        span("tv-tok tv-rejected tv-rej tv-faded", 5, "rejected", "rejected draft at 5, round 1", "f"),
        span("tv-tok tv-resampled tv-r0", 5, "resampled", "position 5: resampled · round 1 · q (target) 0.7000 · "
             "not tested", "F", 0),
        span("tv-tok tv-context", 6, "context", "position 6: text you typed", "<z>"),
        span("tv-tok tv-drafted tv-faded tv-ghost", 7, "discarded", "draft discarded untested at the end of its round",
             "<g>"),
        span("tv-tok tv-masked", 7, "masked", "position 7: drafted · round 1 · p (proposal) 0.1250 · not tested", M),
    ]
    assert "&lt;g&gt;" in html and "&lt;z&gt;" in html and "<g>" not in html and "<z>" not in html


def test_html_of_round_zero_and_two():
    st = fold(TEXTS, MASKED, MAIN, upto=6)
    sp = tokens(tokens_html(st))
    assert sp[3] == span("tv-tok tv-rejected tv-rej", 3, "rejected", "position 3: rejected · round 1 · "
                         f"p (proposal) 0.0000 · q (target) 0.3000 · {TESTED}", "d")
    assert sp[5] == span("tv-tok tv-rejected tv-rej", 5, "rejected", "position 5: rejected · round 1 · "
                         f"p (proposal) 0.8000 · q (target) 0.2000 · {ACC} 0.2500 · {TESTED}", "f")
    assert sp[4] == span("tv-tok tv-drafted", 4, "drafted", "position 4: drafted · round 1 · p (proposal) 0.5000 · "
                         "not tested", "e")
    st.apply(MAIN[6])
    sp = tokens(tokens_html(st))  # rejected in this round: struck through, not faded
    assert sp[3] == span("tv-tok tv-rejected tv-rej", 3, "rejected", "rejected draft at 3, round 1", "d")
    assert sp[4][0]["data-pos"] == "3" and sp[4][0]["data-role"] == "resampled"
    sp = tokens(tokens_html(fold(TEXTS, MASKED, MAIN)))
    assert sp[-1] == span("tv-tok tv-bonus tv-r0", 7, "bonus", "position 7: bonus · round 3 · q (target) 0.9500 · "
                          "not tested", "G", 2)
    sp = tokens(tokens_html(fold(TEXTS, MASKED, [])))
    assert sp[0] == span("tv-tok tv-masked", 0, "masked", "position 0: masked", M)
    assert len(sp) == 8


def test_hover_text_fallbacks():
    # an accepted draft kept untested with no note; outcome missing from a hand-built info
    st = fold(["[M]", "[M]"], [0, 1], [S(D, 0, [0], [1], ["a"], [0.5]),
                                       S(A, 0, [0], [1], ["a"], [None], [0.5], tested=False)])
    sp = tokens(tokens_html(st))
    assert sp[0][0]["title"] == ("position 0: accepted · round 1 · q (target) 0.5000 · kept without a test: its "
                                 "proposal already was the exact target")
    st = TraceState(token_texts=["[M]", "x"], masked=[0], info={0: {"round": 0}}, rejected={0: ""})
    sp = tokens(tokens_html(st))
    # a rejected draft with no recorded round: round 1, not faded; an empty text shows as the empty-set sign
    assert sp[0] == span("tv-tok tv-rejected tv-rej", 0, "rejected", "rejected draft at 0, round 1", "\u2205")
    assert sp[1] == span("tv-tok tv-masked", 0, "masked", "position 0: masked · round 1 · not tested", M)


def test_view_html_and_legend():
    st = fold(TEXTS, MASKED, MAIN, upto=4)
    assert view_html(st) == legend_html() + tokens_html(st)
    assert "tv-title" not in view_html(st) and Spans(view_html(st)).title is None
    titled = view_html(st, title="a <b>")
    assert titled == legend_html() + '<div class="tv-title">a &lt;b&gt;</div>' + tokens_html(st)
    assert view_html(None) == legend_html() + '<div class="tv-wrap">Nothing to show yet.</div>'
    assert view_html(None, message="x & y") == legend_html() + '<div class="tv-wrap">x &amp; y</div>'
    items = "".join(f'<span class="tv-tok tv-{r}" title="{html_escape(d)}">{html_escape(lab)}</span>'
                    for r, (lab, _, _, d) in ROLES.items())
    assert len(ROLES) == 8 and 'title="drawn from the residual max(q - p, 0) after a rejection">resampled<' in items
    assert legend_html() == (
        f'<div class="tv-legend">{items}'
        '<span class="tv-tok tv-rejected tv-rej tv-faded" title="a rejected or discarded draft of an earlier round">'
        "earlier draft (faded)</span>"
        '<span class="tv-tok tv-accepted tv-r1" title="decided tokens are underlined in two alternating shades, one '
        'per round">round boundary</span></div>'
    )


def html_escape(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;").replace("'", "&#x27;")


def test_untested_note_in_hover_is_escaped():
    st = fold(["[M]"], [0], [S(D, 0, [0], [1], ["a"], [0.5]),
                             S(A, 0, [0], [1], ["a"], [None], [0.5], note='<em x="1">n</em>', tested=False)])
    html = view_html(st)
    assert "<em" not in html and "&lt;em x=&quot;1&quot;&gt;n&lt;/em&gt;" in html
    assert tokens(html)[-1][0]["title"].endswith('exact target (<em x="1">n</em>)')


# --- the byte path: tokens holding part of a character ---------------------------------------------

BYTES = {1: b"x", 2: b"\xc3", 3: b"\xbc", 4: b"y", 6: b"q", 8: b"\xe2\x82"}


def byte_steps():
    return [
        S(D, 0, [1, 2, 3], [2, 3, 8], ["\ufffd"] * 3, [0.5, 0.5, 0.2]),
        S(A, 0, [1], [2], ["\ufffd"], [None], [0.5]),
        S(R, 0, [2], [3], ["\ufffd"], [None], [0.25]),
        S(StepKind.RESAMPLE, 0, [2], [], ["Z"], [], [0.9]),  # no token id recorded: its own text
        S(StepKind.DRAFT_PASS, 1),
    ]


def test_byte_labels_and_characters_across_tokens():
    t, m, ids = ["x", "[M]", "[M]", "[M]", "y"], [1, 2, 3], [1, 6, 6, 6, 4]
    st = fold(t, m, byte_steps(), upto=1, ids=ids, bytes_of=BYTES.__getitem__)
    assert st.cur == [1, 2, 3, 8, 4]
    assert st.detail == [[1, "<C3>", "0.5000", "", "", "drafted"], [2, "<BC>", "0.5000", "", "", "drafted"],
                         [3, "<E2><82>", "0.2000", "", "", "drafted"]]
    assert st.display_texts() == ["x", "ü", "", "<E2><82>", "y"]
    sp = tokens(tokens_html(st))
    assert sp[2] == span("tv-tok tv-drafted tv-cont", 2, "drafted", "position 2: drafted · round 1 · p (proposal) "
                         "0.5000 · not tested", "")
    assert sp[1][1] == "ü" and sp[1][0]["class"] == "tv-tok tv-drafted"
    st = fold(t, m, byte_steps(), upto=3, ids=ids, bytes_of=BYTES.__getitem__)
    assert st.detail == [[1, "<C3>", "0.5000", "0.5000", "1.0000", "accepted"],
                         [2, "<BC>", "0.5000", "0.2500", "0.5000", "rejected"],
                         [3, "<E2><82>", "0.2000", "", "", "drafted"]]
    assert st.rejected_text(2) == "<BC>" and st.display_texts() == ["x", "<C3>", "<BC>", "<E2><82>", "y"]
    st.apply(byte_steps()[3])
    assert st.detail[-1] == [2, "Z", "", "0.9000", "", "resampled"]
    assert st.display_texts() == ["x", "<C3>", "Z", "<E2><82>", "y"]
    st.apply(byte_steps()[4])
    assert st.ghosts == {3: ("\ufffd", 8)} and st.ghost_text(3) == "<E2><82>" and st.cur == [1, 2, None, None, 4]
    assert st.display_texts() == ["x", "<C3>", "Z", M, "y"]
    sp = tokens(tokens_html(st))
    assert sp[1][1] == "<C3>" and sp[2] == span("tv-tok tv-rejected tv-rej tv-faded", 2, "rejected",
                                                  "rejected draft at 2, round 1", "<BC>")
    assert sp[4] == span("tv-tok tv-drafted tv-faded tv-ghost", 3, "discarded",
                         "draft discarded untested at the end of its round", "<E2><82>")
    assert "&lt;C3&gt;" in tokens_html(st)
    # without the input's ids the byte map is not used for the text (only for the labels)
    st = fold(t, m, byte_steps(), upto=1, bytes_of=BYTES.__getitem__)
    assert st.display_texts() == ["x", "\ufffd", "\ufffd", "\ufffd", "y"] and st.detail[0][1] == "<C3>"
    # and without the byte map, each token's own text
    st = fold(t, m, byte_steps(), upto=3, ids=ids)
    assert st.detail[0][1] == "\ufffd" and st.display_texts()[2] == "\ufffd"


def test_exact_html_of_a_small_state():
    st = fold(["a", "[M]"], [1], [])
    assert tokens_html(st) == (
        '<div class="tv-wrap"><span class="tv-tok tv-context" data-pos="0" data-role="context" '
        'title="position 0: text you typed">a</span><span class="tv-tok tv-masked" data-pos="1" data-role="masked" '
        f'title="position 1: masked">{M}</span></div>'
    )
    # a masked position whose text is empty (a state built with its own texts) shows the empty-set sign and is
    # no continuation of its neighbour; a decided empty token is one
    st = TraceState(token_texts=["a", "[M]", "[M]"], masked=[1, 2], texts=["a", "", ""], roles=["context", "masked", "sampled"])
    sp = tokens(tokens_html(st))
    assert sp[1] == span("tv-tok tv-masked", 1, "masked", "position 1: masked", "\u2205")
    assert sp[2] == span("tv-tok tv-sampled tv-cont", 2, "sampled", "position 2: sampled", "")


def test_rejection_in_a_later_round_names_its_round():
    st = fold(["[M]", "[M]"], [0, 1], [S(D, 0, [0], [1], ["a"], [0.5]), S(A, 0, [0], [1], ["a"], [None], [0.5]),
                                       S(D, 1, [1], [2], ["b"], [0.5]),
                                       S(R, 1, [1], [2], ["b"], [0.4], [0.1]),  # the step's own p, not the draft's
                                       S(StepKind.RESAMPLE, 1, [1], [3], ["c"], [None], [0.2]),
                                       S(StepKind.DRAFT_PASS, 2)])
    assert st.rejected_round == {1: 1} and st.info[1]["round"] == 1
    sp = tokens(tokens_html(st))
    assert sp[1] == span("tv-tok tv-rejected tv-rej tv-faded", 1, "rejected", "rejected draft at 1, round 2", "b")
    st = fold(["[M]", "[M]"], [0, 1], [S(D, 0, [1], [2], ["b"], [0.5]), S(R, 0, [1], [2], ["b"], [0.4], [0.1])])
    assert st.detail == [[1, "b", "0.4000", "0.1000", "0.2500", "rejected"]]
    assert st.info[1] == {"p": 0.4, "q": 0.1, "round": 0, "tested": True, "outcome": "rejected"}


def test_byte_labels_of_every_decision_row():
    of = {1: b"\xc3", 2: b"\xbc", 3: b"\xe2", 4: b"ok"}.__getitem__
    st = fold(["[M]", "[M]", "[M]", "[M]"], [0, 1, 2, 3],
              [S(D, 0, [0], [1], ["\ufffd"], [0.5]),
               S(A, 0, [0], [1], ["\ufffd"], [None], [0.5], tested=False),
               S(StepKind.BONUS, 0, [1], [2], ["\ufffd"], [None], [0.9]),
               S(StepKind.SAMPLE, 0, [2], [3], ["\ufffd"], [None], [0.8]),
               S(StepKind.REVEAL, 0, [3], [4], ["?"], [None], [0.7])],
              ids=[None] * 4, bytes_of=of)
    assert st.detail == [[0, "<C3>", "0.5000", "0.5000", "", "kept untested"], [1, "<BC>", "", "0.9000", "", "bonus"],
                         [2, "<E2>", "", "0.8000", "", "sampled"], [3, "ok", "", "0.7000", "", "sampled"]]
    assert st.display_texts() == ["ü", "", "<E2>", "ok"]
