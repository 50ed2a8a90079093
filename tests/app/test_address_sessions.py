"""One address keeps at most INFILL_SESSIONS_PER_ADDRESS sessions in memory (app.serving.address_sessions):
strangers minting sessions push out only their own, never an active visitor's."""

from __future__ import annotations

import uuid

import pytest

from app.serving import address_sessions as owners
from app.serving.address_sessions import AddressSessions
from tests.support.studio import launched_studio


def test_an_address_over_its_cap_drops_its_own_oldest_session():
    rec = AddressSessions(cap=2)
    assert rec.note("198.51.100.1", "v") == []
    assert rec.note("203.0.113.2", "s1") == [] and rec.note("203.0.113.2", "s2") == []
    assert rec.note("203.0.113.2", "s3") == ["s1"]
    assert rec.note("203.0.113.2", "s2") == []  # used again: most recent
    assert rec.note("203.0.113.2", "s4") == ["s3"]
    assert rec.counts() == {"198.51.100.1": 1, "203.0.113.2": 2}


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
    """The run loaded into this session's player (app.replay.StoredTrace), or None."""
    from app.replay import StoredTrace

    session = holder.session_data.get(session_hash)
    found = [v for v in (session.state_data.values() if session else ()) if isinstance(v, StoredTrace)]
    return found[0] if found else None
