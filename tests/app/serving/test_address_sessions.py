"""One address keeps at most INFILL_SESSIONS_PER_ADDRESS sessions in memory, and the server at most
INFILL_SESSIONS_MAX (app.serving.address_sessions): strangers minting sessions, from one address or
from hundreds, never push out a visitor who is reading; a newcomer takes the least recently used
idle session's place, or is refused when every kept session is in use."""

from __future__ import annotations

import uuid

import pytest

from app.serving import address_sessions as owners
from app.serving.address_sessions import AddressSessions, SessionsFull
from tests.support.studio import launched_studio


def test_an_address_over_its_cap_drops_its_own_oldest_session():
    rec = AddressSessions(cap=2)
    assert rec.note("198.51.100.1", "v") == []
    assert rec.note("203.0.113.2", "s1") == [] and rec.note("203.0.113.2", "s2") == []
    assert rec.note("203.0.113.2", "s3") == ["s1"]
    assert rec.note("203.0.113.2", "s2") == []  # used again: most recent
    assert rec.note("203.0.113.2", "s4") == ["s3"]
    assert rec.counts() == {"198.51.100.1": 1, "203.0.113.2": 2}


class Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_strangers_from_many_addresses_never_evict_a_reader_and_the_bound_holds():
    """Issue 48: 200 strangers from 200 addresses in 6 s evicted a visitor who paused 4 s."""
    now = Clock()
    rec = AddressSessions(cap=8, total=16, active_seconds=120, clock=now)
    assert rec.note("198.51.100.1", "visitor") == []
    refused = 0
    for i in range(200):
        now.t += 0.03
        if i == 100:
            rec.note("198.51.100.1", "visitor")  # the visitor steps through its trace again, 3 s later
        try:
            assert "visitor" not in rec.note(f"2001:db8:{i:x}::/64", f"s{i}")
        except SessionsFull as e:
            refused += 1
            assert "in use" in str(e)
        assert sum(rec.counts().values()) <= 16  # the bound holds at every moment
    assert refused == 200 - 15
    assert rec.counts()["198.51.100.1"] == 1


def test_a_newcomer_takes_the_place_of_the_least_recently_used_idle_session():
    now = Clock()
    rec = AddressSessions(cap=8, total=3, active_seconds=120, clock=now)
    for t, sh in ((0, "a"), (10, "b"), (20, "c")):
        now.t = t
        rec.note(f"203.0.113.{t}", sh)
    now.t = 125  # a is idle (125 s), b and c are still in use
    assert rec.note("203.0.113.99", "d") == ["a"]
    rec.opened("b")  # b's page is open: in use however long it has made no call
    now.t = 500
    assert rec.note("203.0.113.98", "e") == ["c"]  # b skipped: its page is open
    now.t = 530
    rec.closed("b")  # the page closed: its idle time counts from now
    now.t = 560
    assert rec.note("203.0.113.97", "f") == ["d"]
    with pytest.raises(SessionsFull):
        rec.note("203.0.113.96", "g")  # e, b (closed 30 s ago) and f are all in use
    assert rec.idle_for(45) == ["e"]  # the memory sweep's rule: no call for that long
    assert rec.counts() == {"203.0.113.10": 1, "203.0.113.97": 1}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with launched_studio(tmp_path_factory.mktemp("owners")) as (demo, url, _):
        yield demo, url


def test_an_active_visitor_keeps_its_session_through_200_strangers(server, monkeypatch):
    from tests.support.studio import TEXT
    from tools.loadtest import form
    from tools.visitor_http import call

    demo, url = server
    monkeypatch.setenv("INFILL_LIMIT_RUN", "0,0")  # 200 calls in a few seconds: this tests sessions, not call limits
    monkeypatch.setattr(owners, "_sessions", AddressSessions(cap=8))
    holder = demo.server_app.state_holder
    visitor = uuid.uuid4().hex[:11]
    event, data = call(url, "infill", list(form(TEXT, "assd", 1, k=4)), source="127.0.0.3", session_hash=visitor)
    assert event == "complete" and "Done" in str(data[0])
    assert _trace(holder, visitor) is not None
    for i in range(200):  # strangers from another address, each a new session (refused at once: no mask)
        call(url, "infill", list(form("no mask here", "assd", i)), source="127.0.0.2")
    assert visitor in holder.session_data
    assert _trace(holder, visitor) is not None  # the player still steps through its run
    strangers = [sh for sh in holder.session_data if sh != visitor]
    assert len(strangers) <= 8
    assert owners.address_sessions().counts()["127.0.0.2"] == 8


def _trace(holder, session_hash: str):
    """The run loaded into this session's player (app.stored.replay.StoredTrace), or None."""
    from app.stored.replay import StoredTrace

    session = holder.session_data.get(session_hash)
    found = [v for v in (session.state_data.values() if session else ()) if isinstance(v, StoredTrace)]
    return found[0] if found else None


def test_a_visitor_pausing_10_s_keeps_its_trace_through_200_strangers_from_200_addresses(server, monkeypatch):
    """The HTTP path: every stranger is its own address (127.0.1.x), one call each; the visitor pauses
    10 s (no call), then steps through its run. The kept sessions never exceed the bound; the
    strangers past it are refused with one sentence."""
    import time

    from tests.support.studio import TEXT
    from tools.loadtest import form
    from tools.visitor_http import call

    demo, url = server
    holder = demo.server_app.state_holder
    with holder.lock:
        holder.session_data.clear()
        holder.time_last_used.clear()
    monkeypatch.setattr(owners, "_sessions", AddressSessions(cap=8, total=16, active_seconds=120))
    visitor = uuid.uuid4().hex[:11]
    event, data = call(url, "infill", list(form(TEXT, "assd", 1, k=4)), source="127.0.0.3", session_hash=visitor)
    assert event == "complete" and _trace(holder, visitor) is not None
    refused, most = 0, 0
    t0 = time.monotonic()
    for i in range(200):
        try:
            call(url, "infill", list(form("no mask here", "assd", i)), source=f"127.0.1.{i + 1}")
        except RuntimeError as e:
            assert "429" in str(e) and "in use" in str(e)
            refused += 1
        most = max(most, len(holder.session_data))
    time.sleep(max(0.0, 10 - (time.monotonic() - t0)))
    assert _trace(holder, visitor) is not None  # the player still steps through its run
    assert most <= 16 and refused == 200 - 15


def test_an_open_page_is_seen_by_its_heartbeat_stream(monkeypatch):
    """The page keeps Gradio's heartbeat stream open (GET .../heartbeat/<session>): the middleware
    marks the session in use while it is open."""
    import asyncio

    import httpx

    from app.serving import limits as limits_mod

    rec = AddressSessions(cap=8, total=2, active_seconds=0)
    monkeypatch.setattr(limits_mod, "address_sessions", lambda: rec)
    rec.note("203.0.113.1", "reader")
    release, seen = asyncio.Event(), asyncio.Event()

    async def stream(scope, receive, send):
        seen.set()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def scenario():
        transport = httpx.ASGITransport(app=limits_mod.BodyLimit(stream), client=("203.0.113.1", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://studio") as c:
            page = asyncio.create_task(c.get("/gradio_api/heartbeat/reader"))
            await seen.wait()
            rec.note("203.0.113.2", "x")
            assert rec.note("203.0.113.3", "y") == ["x"]  # the reader's open page keeps it
            release.set()
            await page
        # closed: its last use is the closing, and then it is idle like any other (active_seconds=0)
        assert rec.note("203.0.113.4", "z") == ["y"] and rec.note("203.0.113.5", "w") == ["reader"]

    asyncio.run(scenario())
