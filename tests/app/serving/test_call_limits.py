"""Every endpoint bounded per address, in calls in flight and calls per minute (app.serving.call_limits),
enforced by the request limits' middleware (app.serving.limits.BodyLimit) before Gradio reads a call:
one sentence for the refused visitor (429), one log line per burst, other addresses unaffected."""

from __future__ import annotations

import asyncio
import json
import logging
from types import SimpleNamespace

import httpx
import pytest

from app.serving import call_limits as cl
from app.serving import limits as limits_mod


@pytest.fixture(autouse=True)
def fresh_limits(monkeypatch):
    """Each test on its own bounds (the process's record would carry one test's minute into the next)."""
    monkeypatch.setattr(cl, "_limits", cl.CallLimits())
    monkeypatch.setattr(cl, "REFUSAL_HOLD", 0.0)  # held answers: their own test below
    monkeypatch.delenv("INFILL_CALL_LIMITS", raising=False)
    for g in cl.DEFAULTS:
        monkeypatch.delenv(f"INFILL_LIMIT_{g.upper()}", raising=False)


class Held:
    """An ASGI app standing in for Gradio: a call answers once `release` is set (so calls stay in flight)."""

    def __init__(self):
        self.release = asyncio.Event()
        self.seen = 0

    async def __call__(self, scope, receive, send):
        await receive()
        self.seen += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": b"{}"})


def _client(app, address: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=limits_mod.BodyLimit(app), client=(address, 5000)),
                             base_url="http://studio")


async def _post(client, path: str, body: dict | None = None):
    return await client.post(path, content=json.dumps(body or {"data": [], "session_hash": "s1"}))


def test_every_endpoint_of_the_issue_has_a_group_and_a_bound():
    assert {cl.group_of(n) for n in ("stop", "stop_run", "skip_to_end")} == {"stop"}
    assert cl.group_of("stats_3") == "statistics" and cl.group_of("input_info_2") == cl.OTHER
    for name, group in [("scrub", "scrub"), ("load_share", "share"), ("stats", "statistics"),
                        ("exactness", "exactness"), ("compare", "compare"), ("infill", "run"), ("run_page", "run")]:
        assert cl.group_of(name) == group
    assert all(cl.bounds(g)[0] > 0 and cl.bounds(g)[1] > 0 for g in cl.DEFAULTS)


def test_bounds_from_the_environment(monkeypatch):
    monkeypatch.setenv("INFILL_LIMIT_STOP", "3,7")
    assert cl.bounds("stop") == (3, 7)
    monkeypatch.setenv("INFILL_LIMIT_STOP", "nonsense")
    assert cl.bounds("stop") == cl.DEFAULTS["stop"]
    monkeypatch.setenv("INFILL_CALL_LIMITS", "0")
    assert cl.bounds("run") == (0, 0)


@pytest.mark.parametrize("group", sorted(cl.GROUPS))
def test_calls_over_the_bound_in_flight_are_refused_at_once_and_others_are_served(group, monkeypatch, caplog):
    """A direct call (`/run/<name>`: what the page uses for Stop) is in flight while its request
    is open: past the bound, the address's next call is answered 429 at once with one sentence,
    without reaching the app; another address is served; one log line for the burst."""
    name = cl.GROUPS[group][0]
    monkeypatch.setenv(f"INFILL_LIMIT_{group.upper()}", "2,1000")
    app = Held()

    async def scenario():
        async with _client(app, "127.0.0.2") as a, _client(app, "127.0.0.3") as b:
            held = [asyncio.create_task(_post(a, f"/gradio_api/run/{name}")) for _ in range(2)]
            while app.seen < 2:
                await asyncio.sleep(0.01)
            # a refusal answers at once (a call let through would wait for `release`: the bound failed)
            refused = [await asyncio.wait_for(_post(a, f"/gradio_api/run/{name}"), 5) for _ in range(5)]
            other = asyncio.create_task(_post(b, f"/gradio_api/run/{name}"))
            while app.seen < 3:
                await asyncio.sleep(0.01)
            app.release.set()
            done = [await t for t in held]
            return done, refused, await other, await _post(a, f"/gradio_api/run/{name}")

    with caplog.at_level(logging.INFO, logger="app.limits"):
        held, refused, other, again = asyncio.run(scenario())
    assert [r.status_code for r in held] == [200, 200] and other.status_code == 200
    assert again.status_code == 200  # answered calls leave the count: the address is served again
    assert {r.status_code for r in refused} == {429}
    assert "at once (at most 2)" in refused[0].json()["detail"] and refused[0].headers["retry-after"] == "1"
    assert app.seen == 4  # the refused calls never reached the app (3 held or other, then `again`)
    lines = [r for r in caplog.records if r.name == "app.limits"]
    assert len(lines) == 1 and "127.0.0.2" in lines[0].getMessage() and group in lines[0].getMessage()
    assert cl.call_limits().refusals() == {"127.0.0.2": 5}


@pytest.mark.parametrize("group", sorted(cl.GROUPS))
def test_calls_over_the_bound_per_minute_are_refused(group, monkeypatch):
    """Queued calls (`/call/<name>`) count against the minute as well; past it, 429 saying when to
    come back; another address keeps its own minute."""
    name = cl.GROUPS[group][-1]
    monkeypatch.setenv(f"INFILL_LIMIT_{group.upper()}", "0,3")
    app = Held()
    app.release.set()

    async def scenario():
        async with _client(app, "127.0.0.2") as a, _client(app, "127.0.0.3") as b:
            mine = [await _post(a, f"/gradio_api/call/{name}") for _ in range(5)]
            return mine, await _post(b, f"/gradio_api/call/{name}")

    mine, other = asyncio.run(scenario())
    assert [r.status_code for r in mine] == [200, 200, 200, 429, 429]
    assert "at most 3 a minute" in mine[-1].json()["detail"] and int(mine[-1].headers["retry-after"]) >= 1
    assert other.status_code == 200


def test_a_queue_join_is_bounded_by_the_events_gradio_holds_for_its_address(monkeypatch):
    """A queue join returns at once; its call is in flight while Gradio's queue holds the event
    (waiting or computing). The join's endpoint is read from the body's fn_index."""
    monkeypatch.setenv("INFILL_LIMIT_STOP", "2,1000")
    stop_fn = SimpleNamespace(api_name="stop")

    def event(address):
        return SimpleNamespace(fn=stop_fn, request=SimpleNamespace(scope={"client": (address, 1), "headers": []}))

    held = {"a": event("127.0.0.2"), "b": event("127.0.0.2"), "c": event("127.0.0.3")}
    blocks = SimpleNamespace(fns={7: stop_fn}, _queue=SimpleNamespace(event_ids_to_events=held))
    app = Held()
    app.release.set()

    async def join(address):
        transport = httpx.ASGITransport(app=_with_app(limits_mod.BodyLimit(app), blocks), client=(address, 5))
        async with httpx.AsyncClient(transport=transport, base_url="http://studio") as c:
            return await _post(c, "/gradio_api/queue/join", {"data": [], "fn_index": 7, "session_hash": "s"})

    assert asyncio.run(join("127.0.0.2")).status_code == 429  # two of its stops are in the queue already
    assert asyncio.run(join("127.0.0.3")).status_code == 200  # one: room for another
    del held["a"]  # Gradio finished one
    assert asyncio.run(join("127.0.0.2")).status_code == 200


@pytest.mark.parametrize("path", ["/gradio_api/call/stop", "/gradio_api/queue/join"])
def test_calls_sent_at_once_count_in_flight_from_their_admission(path, monkeypatch):
    """Joins sent together are all admitted before Gradio's queue holds any of them: each counts
    in flight from its admission until its join is answered, so the bound holds for a burst too."""
    monkeypatch.setenv("INFILL_LIMIT_STOP", "2,1000")
    stop_fn = SimpleNamespace(api_name="stop")
    blocks = SimpleNamespace(fns={7: stop_fn}, _queue=SimpleNamespace(event_ids_to_events={}))
    app = Held()

    async def scenario():
        transport = httpx.ASGITransport(app=_with_app(limits_mod.BodyLimit(app), blocks), client=("127.0.0.2", 5))
        async with httpx.AsyncClient(transport=transport, base_url="http://studio") as c:
            calls = [asyncio.create_task(_post(c, path, {"data": [], "fn_index": 7, "session_hash": "s"}))
                     for _ in range(6)]
            while app.seen < 2:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.1)
            app.release.set()
            return [(await t).status_code for t in calls]

    codes = asyncio.run(scenario())
    assert sorted(codes) == [200, 200, 429, 429, 429, 429] and app.seen == 2


@pytest.mark.parametrize("path,fn_index", [("/gradio_api/queue/join", "7"), ("/gradio_api/queue/join", 7.0),
                                           ("/gradio_api/run/show_tokens", 7), ("/gradio_api/api/predict", "7")])
def test_a_call_is_bounded_as_the_event_its_fn_index_names(path, fn_index, monkeypatch):
    """Gradio reads fn_index leniently ("7" and 7.0 are 7) and, on a direct route, runs the event
    it names whatever the path says: the bound is the named event's, not the loose "other" one."""
    monkeypatch.setenv("INFILL_LIMIT_STOP", "2,1000")
    stop_fn = SimpleNamespace(api_name="stop")

    def event(address):
        return SimpleNamespace(fn=stop_fn, request=SimpleNamespace(scope={"client": (address, 1), "headers": []}))

    held = {"a": event("127.0.0.2"), "b": event("127.0.0.2")}
    blocks = SimpleNamespace(fns={7: stop_fn, 3: SimpleNamespace(api_name="show_tokens")},
                             _queue=SimpleNamespace(event_ids_to_events=held))
    app = Held()
    app.release.set()

    async def call():
        transport = httpx.ASGITransport(app=_with_app(limits_mod.BodyLimit(app), blocks), client=("127.0.0.2", 5))
        async with httpx.AsyncClient(transport=transport, base_url="http://studio") as c:
            return await _post(c, path, {"data": [], "fn_index": fn_index, "session_hash": "s"})

    assert asyncio.run(call()).status_code == 429 and app.seen == 0


@pytest.mark.parametrize("path", ["/gradio_api/component_server", "/gradio_api/component_server/",
                                  "/gradio_api/process_recording"])
def test_routes_the_page_never_calls_are_not_served(path):
    """They would make a visitor session outside the address's record (and evict a reader)."""
    app = Held()
    app.release.set()

    async def call():
        async with _client(app, "127.0.0.2") as c:
            return await _post(c, path, {"data": [], "session_hash": "stranger", "fn_index": 1,
                                         "component_id": 1, "fn_name": "x"})

    r = asyncio.run(call())
    assert r.status_code == 404 and app.seen == 0


def _with_app(middleware, blocks):
    """Starlette puts the application (Gradio's, which knows its Blocks) in the scope."""
    async def app(scope, receive, send):
        scope["app"] = SimpleNamespace(get_blocks=lambda: blocks)
        await middleware(scope, receive, send)
    return app


def test_a_refusal_burst_logs_one_line_and_a_later_burst_another(monkeypatch, caplog):
    lim = cl.CallLimits()
    now = [0.0]
    monkeypatch.setattr(cl.time, "monotonic", lambda: now[0])
    monkeypatch.setenv("INFILL_LIMIT_STOP", "1,1000")
    with caplog.at_level(logging.INFO, logger="app.limits"):
        for _ in range(50):
            assert lim.admit("10.0.0.1", "stop", queued=1) is not None
            now[0] += 1.0  # one a second: one burst
        now[0] += cl.BURST_GAP + 1
        assert lim.admit("10.0.0.1", "stop", queued=1) is not None
    assert len([r for r in caplog.records if r.name == "app.limits"]) == 2
    assert lim.refusals() == {"10.0.0.1": 51}
    assert lim.admit("10.0.0.1", "stop", queued=0) is None


def test_ipv6_addresses_of_one_64_share_one_bound(monkeypatch):
    monkeypatch.setenv("INFILL_LIMIT_STOP", "0,2")
    app = Held()
    app.release.set()

    async def one(address):
        async with _client(app, address) as c:
            return (await _post(c, "/gradio_api/call/stop")).status_code

    codes = [asyncio.run(one(f"2001:db8:1:2::{i:x}")) for i in range(1, 5)]
    assert codes == [200, 200, 429, 429]
    assert asyncio.run(one("2001:db8:1:3::1")) == 200  # the next /64 is another visitor


def test_a_burst_s_later_refusals_are_answered_late_so_a_flood_slows_itself(monkeypatch):
    """The first refusal of a burst is answered at once; later ones are held back REFUSAL_HOLD
    seconds (no thread, no work), so a client re-sending as soon as it is answered sends a few calls
    a second, not hundreds; past HELD_PER_ADDRESS held answers, the rest go out at once."""
    import time

    monkeypatch.setattr(cl, "REFUSAL_HOLD", 0.4)
    monkeypatch.setattr(cl, "HELD_PER_ADDRESS", 2)
    monkeypatch.setenv("INFILL_LIMIT_STOP", "0,1")
    app = Held()
    app.release.set()

    async def timed(c):
        t0 = time.perf_counter()
        r = await _post(c, "/gradio_api/run/stop")
        return r.status_code, time.perf_counter() - t0

    async def scenario():
        async with _client(app, "127.0.0.2") as a:
            allowed = await timed(a)
            first = await timed(a)
            later = await asyncio.gather(*(timed(a) for _ in range(4)))
            return allowed, first, later

    allowed, first, later = asyncio.run(scenario())
    assert allowed[0] == 200 and first[0] == 429 and first[1] < 0.3
    assert sorted(code for code, _ in later) == [429] * 4
    held = sorted(t for _, t in later)
    assert held[-2] >= 0.4 and held[-1] >= 0.4 and held[0] < 0.3 and held[1] < 0.3  # two held, two past the cap
    assert cl.call_limits()._held == {}  # every held answer went out


def test_a_v2_call_body_reaches_gradio_as_sent():
    """`/call/v2/<name>` takes named parameters: a session hash added to it would be an unknown
    parameter (Gradio answers 400); a v1 call without one is given one (it counts for its address)."""
    bodies = []

    async def app(scope, receive, send):
        bodies.append(json.loads((await receive())["body"]))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    async def calls():
        async with _client(app, "127.0.0.2") as c:
            await c.post("/gradio_api/call/v2/recent", content=json.dumps({"history": "x"}))
            await c.post("/gradio_api/call/recent", content=json.dumps({"data": ["x"]}))

    asyncio.run(calls())
    assert bodies[0] == {"history": "x"} and bodies[1]["data"] == ["x"] and len(bodies[1]["session_hash"]) == 11


def test_each_launched_server_keeps_its_own_minute(monkeypatch):
    """launch_limits() gives the server it installs a fresh record: a process that launches
    several servers (the tests do) does not carry one server's spent minute into the next."""
    monkeypatch.setenv("INFILL_LIMIT_RUN", "0,1")
    assert cl.call_limits().admit("10.0.0.1", "run") is None
    assert cl.call_limits().admit("10.0.0.1", "run") is not None  # this server's minute is spent
    limits_mod.launch_limits()
    assert cl.call_limits().admit("10.0.0.1", "run") is None
