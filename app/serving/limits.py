"""Request limits in front of Gradio's routes: a body-size cap checked before anything parses the
body, no anonymous uploads (the page has no upload component, so `/upload` is refused), and each
endpoint's calls bounded per address (app.serving.call_limits: refused 429 before Gradio reads them).

Why here and not in a handler: Gradio parses the JSON body and keeps component values in the
visitor's session before any handler runs, so a 20 MB "text" pinned that memory although the
handler then refused it. This ASGI middleware sits between the server and every route: a
declared `Content-Length` over the limit is answered 413 without reading a byte, and a body
without one (chunked) is counted while it streams and cut off at the limit.

`INFILL_MAX_BODY_BYTES` sets the limit (default 256 KiB). The largest legitimate request is a run
of the longest input (inputs.MAX_INPUT_CHARS = 20,000 characters; JSON-escaped as \\uXXXX
surrogate pairs that is at most 12 bytes a character, 240 kB) with its form values. The page sends
the input once a request (a change of the input box would send it twice, as a value and as the
event's data: app.tabs.editor chains the line under the input after the change instead), and an
input over the limit not at all: a short stand-in says its length (app.tabs.long_input), so a long
paste gets the same "at most 20,000 characters" line as one just over the limit. The limit is
that and no more because Gradio keeps a request's input values in the visitor's session even
when the handler refuses them (app.serving.memory bounds how many sessions, and for how long): with a
1 MiB limit, 300 refused 1 MB texts kept 350 MiB."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid

from app.serving import operator_stats
from app.serving.address_sessions import SessionsFull, address_sessions
from app.serving.call_limits import call_limits, fresh_call_limits
from app.serving.visitors import scope_address

DEFAULT_MAX_BODY_BYTES = 256 << 10
log = logging.getLogger("app.requests")


def too_large(limit: int) -> str:
    """The 413's sentence. The page never sends an input over the studio's limit (app.tabs.long_input
    sends a stand-in), so a refused body is another client's or an old page's: say the limit a
    person meets, in characters, beside the bytes."""
    from app.run.inputs import MAX_INPUT_CHARS

    return (f"Request body too large (limit {limit:,} bytes): the studio takes an input of at most "
            f"{MAX_INPUT_CHARS:,} characters. Shorten the input; nothing was cut.")


def max_body_bytes() -> int:
    """The largest request body accepted (INFILL_MAX_BODY_BYTES; the default when unset or invalid)."""
    try:
        v = int(os.environ.get("INFILL_MAX_BODY_BYTES", DEFAULT_MAX_BODY_BYTES))
    except ValueError:
        return DEFAULT_MAX_BODY_BYTES
    return v if v > 0 else DEFAULT_MAX_BODY_BYTES


def _is_upload(path: str) -> bool:
    return path.rstrip("/").endswith("/upload")


class BodyLimit:
    """ASGI middleware: 413 for bodies over `max_bytes`, 403 for the upload route, 429 for a call
    over its address's bounds (app.serving.call_limits)."""

    def __init__(self, app, max_bytes: int | None = None):
        self.app = app
        self.max_bytes = max_bytes if max_bytes is not None else max_body_bytes()

    async def _reply(self, send, status: int, message: str | dict, headers: list | None = None) -> None:
        body = json.dumps(message if isinstance(message, dict) else {"detail": message}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close"), *(headers or [])]})
        await send({"type": "http.response.body", "body": body})

    async def _refuse(self, scope, send, refusal) -> None:
        """A call over its bounds: 429 with the sentence, held back first when the burst is under way
        (app.serving.call_limits.REFUSAL_HOLD: a client re-sending at once is slowed, at no cost)."""
        if refusal.hold > 0:
            address = scope_address(scope)
            call_limits().held(address, +1)
            try:
                await asyncio.sleep(refusal.hold)
            finally:
                call_limits().held(address, -1)
        await self._reply(send, 429, refusal.message, [(b"retry-after", str(refusal.retry_after).encode())])

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if _is_upload(scope.get("path", "")):
            return await self._reply(send, 403, "Uploads are disabled on this server.")
        if scope.get("path", "").rstrip("/") == operator_stats.PATH:
            if scope.get("method") == "GET" and operator_stats.is_operator(scope):
                return await self._reply(send, 200, operator_stats.stats())
            return await self._reply(send, 404, "Not Found")
        limit = self.max_bytes
        for k, v in scope.get("headers", ()):
            if k == b"content-length":
                try:
                    declared = int(v)
                except ValueError:
                    return await self._reply(send, 400, "Bad Content-Length.")
                if declared > limit:
                    return await self._reply(send, 413, too_large(limit))
        if scope.get("method") == "POST" and _unserved(scope.get("path", "")):
            return await self._reply(send, 404, "Not found.")
        in_flight = None
        if scope.get("method") == "POST" and _noted(scope.get("path", "")):
            body = await _read_body(receive, limit)
            if body is None:
                return await self._reply(send, 413, too_large(limit))
            data = _json(body)
            call = _call_of(scope, data)
            if call is not None:  # an endpoint's call: within its address's bounds (app.serving.call_limits)
                refusal = _admit(scope, call[0])
                if refusal is not None:
                    return await self._refuse(scope, send, refusal)
                # in flight from here: a direct call until it is answered; a queued one until its
                # join is answered, by when Gradio's queue holds it (joins sent at once all count)
                in_flight = (scope_address(scope), call[0])
            try:
                body = _note_session(scope, data, body)
            except SessionsFull as e:  # every kept session is in use: refuse the newcomer, evict no reader
                call_limits().note_refusal(scope_address(scope), "sessions", "every kept session in use")
                return await self._reply(send, 429, str(e), [(b"retry-after", b"60")])
            receive = _replay(body, receive)
        page = _heartbeat_session(scope)
        if in_flight is not None:
            call_limits().entered(*in_flight)
        if page:
            address_sessions().opened(page)
        try:
            await self._limited(scope, receive, send, limit)
        finally:
            if in_flight is not None:
                call_limits().left(*in_flight)
            if page:
                address_sessions().closed(page)

    async def _limited(self, scope, receive, send, limit: int) -> None:
        """The app, with the body counted while it streams (cut off at the limit)."""
        seen = 0
        started = refused = False

        async def counted_receive():
            nonlocal seen, started, refused
            if refused:
                return {"type": "http.disconnect"}
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    # answer here (FastAPI turns an exception raised while it reads the body into a
                    # 400), then tell the app the client is gone and drop whatever it still sends
                    refused = True
                    if not started:
                        started = True
                        await self._reply(send, 413, too_large(limit))
                    return {"type": "http.disconnect"}
            return msg

        async def tracked_send(msg):
            nonlocal started
            if refused:
                return
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except Exception as e:  # noqa: BLE001 - a request Gradio's routes could not take: one line, no traceback
            status = refused_request(scope, e)
            if not started and not refused:
                await self._reply(send, status, "Not found." if status == 404 else "Bad request.")


def refused_request(scope, e: Exception) -> int:
    """Log one line for a request that raised in Gradio's routes (an unknown API name, a bad
    fn_index, a malformed body): its address, route, the error and where it was raised, so an
    operator can still find a bug of ours, but no traceback (29 of 206 bad requests
    each wrote one). The status to answer: the HTTP error's own, 404 for an unknown endpoint, else 400."""
    from app.serving.visitors import scope_address

    tb = e.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f"{tb.tb_frame.f_code.co_filename.rsplit('/', 1)[-1]}:{tb.tb_lineno}" if tb is not None else "?"
    status = getattr(e, "status_code", None)
    if not isinstance(status, int):
        status = 404 if type(e).__name__ == "FnIndexInferError" else 400
    log.info("refused %s %s from %s: %s: %s (%s)", scope.get("method"), scope.get("path", "")[:100],
             scope_address(scope), type(e).__name__, str(e)[:160], where)
    return status


#: Gradio routes this page never calls (it has no component server functions and no recording
#: input): each would make or touch a visitor session outside the address's record
#: (app.serving.address_sessions) and outside every call bound, so they are answered 404
UNSERVED = ("/component_server", "/process_recording")


def _unserved(path: str) -> bool:
    return path.rstrip("/").endswith(UNSERVED)


def _noted(path: str) -> bool:
    """A route whose body names the visitor's session or an endpoint: a cancel, a queue join, a
    REST call, a direct call."""
    path = path.rstrip("/")
    return (path.endswith("/cancel") or path.endswith("/queue/join") or "/call/" in path or "/run/" in path
            or "/api/" in path)


def _heartbeat_session(scope) -> str:
    """The session of a page's heartbeat stream (GET .../heartbeat/<session hash>: open while the
    page is), else ""."""
    path = scope.get("path", "").rstrip("/")
    head, _, sh = path.rpartition("/")
    return sh if scope.get("method") == "GET" and head.endswith("/heartbeat") else ""


async def _read_body(receive, limit: int) -> bytes | None:
    """The whole request body (None when it is over the limit)."""
    chunks, size, more = [], 0, True
    while more:
        msg = await receive()
        if msg["type"] != "http.request":
            break
        chunks.append(msg.get("body", b""))
        size += len(chunks[-1])
        if size > limit:
            return None
        more = msg.get("more_body", False)
    return b"".join(chunks)


def _json(body: bytes):
    try:
        return json.loads(body)
    except ValueError:
        return None


def _replay(body: bytes, receive):
    """A receive that hands Gradio the body already read, then the connection's own messages."""
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def _call_of(scope, data) -> tuple[str, bool] | None:
    """(endpoint group, direct?) of a call route, None for any other route: the API name is in
    the path (`/call/<name>`, `/run/<name>`), or the event is named by `fn_index` in the body
    (a queue join, `/run/predict`). Direct calls (`/run/`, `/api/`) compute while the request is open."""
    from app.serving.call_limits import group_of

    path = scope.get("path", "").rstrip("/")
    if path.endswith("/cancel"):
        return None
    direct = "/run/" in path or "/api/" in path
    name = path.rsplit("/", 1)[-1]
    if path.endswith("/queue/join") or direct:  # Gradio runs the event its body's fn_index names, if any
        fn_index = _fn_index(data)
        if fn_index is not None or not direct:
            fn = getattr(_blocks(scope), "fns", {}).get(fn_index)
            name = getattr(fn, "api_name", None) or ""
    return group_of(name), direct


def _fn_index(data) -> int | None:
    """The body's fn_index read the way Gradio's routes read it (its PredictBody: "49" and 49.0 are
    49), so that a call is bounded as the event Gradio will run; None when absent or unreadable
    (Gradio then looks the event up by the path's name, or refuses the body)."""
    from gradio.data_classes import PredictBody
    from pydantic import ValidationError

    if not isinstance(data, dict) or data.get("fn_index") is None:
        return None
    try:
        return PredictBody.model_validate({"data": [], "fn_index": data["fn_index"]}).fn_index
    except ValidationError:
        return None


def _blocks(scope):
    app = scope.get("app")
    try:
        return app.get_blocks()
    except Exception:  # noqa: BLE001 - not Gradio's app (a test's): no queue to read
        return None


def _admit(scope, group: str):
    """The call limits' answer for this request (None: go ahead)."""
    from app.serving.call_limits import queued_calls

    address = scope_address(scope)
    return call_limits().admit(address, group, queued_calls(_blocks(scope), address, group))


def _note_session(scope, data, body: bytes) -> bytes:
    """Note what a call's body says about the visitor's session, and return the body for Gradio:

    - a cancel: the visitor's cancel (app.serving.cancels);
    - a queue join, REST call or direct call: the session against the address it came from
      (app.serving.address_sessions), dropping the sessions that makes room for (SessionsFull when
      none may go); a REST call without a session hash is given one here, so that it too counts
      against its address."""
    from app.serving.address_sessions import drop_sessions
    from app.serving.cancels import note_cancel

    path = scope.get("path", "").rstrip("/")
    if isinstance(data, dict):
        sh = data.get("session_hash")
        if path.endswith("/cancel"):
            if isinstance(sh, str) and sh and not _cancels_a_replay(scope, data):
                note_cancel(sh)
        else:
            if sh is None and "/call/" in path and "/call/v2/" not in path:  # v2 bodies are named parameters
                sh = data["session_hash"] = uuid.uuid4().hex[:11]
                body = json.dumps(data).encode()
            if isinstance(sh, str) and sh:
                drop = address_sessions().note(scope_address(scope), sh)
                drop_sessions(getattr(scope.get("app"), "state_holder", None), drop)
    return body


#: the page's events that replay stored steps and compute nothing: Run, Pause and the step buttons cancel
#: them (app.tabs.player), and such a cancel is no visitor's cancel of a run. Counted as one, it called
#: off the very run whose Run click sent it, when it reached the server after that click.
REPLAY_EVENTS = frozenset({"play_page", "replay_page"})


def _cancels_a_replay(scope, data: dict) -> bool:
    """Whether this /cancel names a replay event (REPLAY_EVENTS) of the app's page; False when that cannot
    be told (then it counts as the visitor's cancel, the safe side for a run waiting for its seat)."""
    try:
        fn = scope["app"].get_blocks().fns[int(data["fn_index"])]
    except (KeyError, TypeError, ValueError, AttributeError, IndexError):
        return False
    return getattr(fn, "api_name", None) in REPLAY_EVENTS


def launch_limits() -> dict:
    """Keyword arguments for `Blocks.launch` that install the limits (serve() and the tests); the
    server's own timeouts (app.serving.timeouts) are installed on the way."""
    from starlette.middleware import Middleware

    from app.serving import timeouts
    from app.serving.address_sessions import sessions_max
    from app.serving.memory import lifespan

    timeouts.install()
    fresh_call_limits()

    return {"app_kwargs": {"middleware": [Middleware(BodyLimit)], "lifespan": lifespan},
            "max_file_size": "1kb", "state_session_capacity": sessions_max() + session_margin()}


def session_margin() -> int:
    """Room in Gradio's own session store above the sessions the address record keeps: Gradio
    evicts its least recently used session, reader or not, when it is over capacity, so it must
    never be the one to evict (app.serving.address_sessions drops sessions by its rule first)."""
    from app.serving.address_sessions import sessions_max

    return max(16, sessions_max() // 4)


#: Gradio's file cache (the CSV download of /stats lands there): every 5 minutes, delete what is
#: older than 10 minutes (a download link stays valid that long; the hourly prune let 116 MB of
#: CSV copies pile up in a minute of /stats calls).
DELETE_CACHE = (300, 600)
