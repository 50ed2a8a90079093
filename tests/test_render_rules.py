"""Every string that reaches the trace view's HTML is escaped, whatever role its token has: typed
context, a draft, a draft discarded untested (its faded ghost), a rejected draft, a decided token,
a title and a message. Hostile strings are pushed through each role and looked for unescaped."""

from __future__ import annotations

from app.render import fold, view_html
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
