"""The Exactness tab through the app's public API (gradio_client), on the tiny random models of
tools.tiny_models: a check runs, is stored, and its share link replays it without running anything; bad
input comes back as a message in the page."""

from __future__ import annotations

import pytest

from tests.app.test_app import app_url, client  # noqa: F401 - the launched app and its client

TEXT = "The cat sat on the [MASK:2] mat."


def _check(client, text=TEXT, samplers=("assd-cache", "wrong-assd-accept-all"), n=60, seed=0):  # noqa: F811
    job = client.submit(text, "text-asarm", list(samplers), n, seed, 1.0, 5, api_name="/exactness")
    list(job)
    return job.outputs()[-1]


def test_check_runs_stores_and_replays(client, monkeypatch):  # noqa: F811
    from app.tabs import exactness

    status, fig, table, link = _check(client)
    assert "Done" in status and "?s=" in link, status
    assert "assd-cache" in table and "wrong-assd-accept-all" in table and "deliberately wrong" in table
    assert fig is not None
    sid = link.split("?s=")[-1]

    def no_model(*a, **k):
        raise AssertionError("a replay must not run the check")

    monkeypatch.setattr(exactness, "ExactnessCheck", no_model)  # the app runs in this process
    r = client.predict(sid, api_name="/load_share")
    replay = dict(zip(["text", "model", "samplers", "n", "seed", "temperature", "k", "status", "plot", "table", "link"],
                      r[-11:]))
    assert "Restored exactness check" in replay["status"] and "no model was run" in replay["status"]
    assert replay["table"] == table, "the replayed table is the live one"
    assert replay["link"] == link


def test_long_span_verdict_in_plain_words_with_power(client):  # noqa: F811
    """A 5-token span (beyond the enumerated table) is checked: each row says its verdict in words,
    the power against the wrong rules, and where the draws depart most."""
    status, _, table, link = _check(client, "The cat sat on the [MASK:5] mat.", ("sequential-cache",
                                    "wrong-assd-accept-all"), n=40)
    assert "Done" in status and "?s=" in link, status
    assert "power" in table and "against wrong-assd-residual-from-q" in table and "departs most at" in table
    assert "not consistent with exact sampling" in table  # accept-all, 5 tokens, N = 40
    assert "token " in table and " of 5 (p = " in table


@pytest.mark.parametrize("text, samplers, n, needle", [
    ("The cat sat on the mat.", ("assd",), 10, "Nothing is masked"),
    (TEXT, ("assd",), 5000, "budget"),
    (TEXT, ("assd", "self-spec"), 10, "different models"),
    (TEXT, (), 10, "at least one sampler"),
])
def test_bad_input_is_a_message_in_the_page(client, text, samplers, n, needle):  # noqa: F811
    status, _, _, link = _check(client, text, samplers, n)
    assert "⚠️" in status and needle in status, status
    assert not link


def test_stop_ends_a_check_at_its_next_draw_and_stores_nothing(client, monkeypatch):  # noqa: F811
    """Stop the check (issue 49): the check in progress on that page ends at its next draw with a
    frame saying how far it got; nothing is stored, so no link."""
    from types import SimpleNamespace

    from app.tabs import exactness

    page = SimpleNamespace(session_hash="page-stop-check", headers={}, client=SimpleNamespace(host="127.0.0.1"))
    gen = exactness.run(TEXT, "text-asarm", ["assd-cache", "wrong-assd-accept-all"], 400, 0, 1.0, 5, request=page)
    frames = []
    for f in gen:
        frames.append(f)
        if "Drawing" in str(f.get("ex_status", "")):
            assert "Stopping" in exactness.stop_check(page)["ex_status"]
    last = frames[-1]
    assert "Stopped after" in last["ex_status"] and "nothing is stored" in last["ex_status"], last
    assert last["ex_link"] == ""


def test_the_checks_stop_and_the_runs_stop_are_kept_apart():
    """One stop record (app.serving.stops), keyed apart: Stop the check never stops the page's Run, and
    the Run's Stop (its owner stop) never ends the page's check."""
    import time
    from types import SimpleNamespace

    from app.serving import stops
    from app.tabs import exactness

    page, t0 = SimpleNamespace(session_hash="page-apart"), time.monotonic()
    exactness.stop_check(page)
    assert stops.owner_stopped_since(exactness._checker(page), t0)
    assert not stops.owner_stopped_since("page-apart", t0)
    other, t1 = SimpleNamespace(session_hash="page-apart-2"), time.monotonic()
    stops.request_owner_stop("page-apart-2", time.monotonic())
    assert not stops.owner_stopped_since(exactness._checker(other), t1)
