"""Request limits in front of Gradio's routes: a body-size cap checked before anything parses the
body, and no anonymous uploads (the page has no upload component, so `/upload` is refused).

Why here and not in a handler: Gradio parses the JSON body and keeps component values in the
visitor's session before any handler runs, so a 20 MB "text" pinned that memory although the
handler then refused it. This ASGI middleware sits between the server and every route: a
declared `Content-Length` over the limit is answered 413 without reading a byte, and a body
without one (chunked) is counted while it streams and cut off at the limit.

`INFILL_MAX_BODY_BYTES` sets the limit (default 256 KiB). The largest legitimate request is a run
of the longest input (inputs.MAX_INPUT_CHARS = 20,000 characters; JSON-escaped as \\uXXXX
surrogate pairs that is at most 12 bytes a character, 240 kB) with its form values. The limit is
that and no more because Gradio keeps a request's input values in the visitor's session even
when the handler refuses them (app.serving.memory bounds how many sessions, and for how long): with a
1 MiB limit, 300 refused 1 MB texts kept 350 MiB (issue 28)."""

from __future__ import annotations

import json
import logging
import os
import uuid

from app.serving import operator_stats

DEFAULT_MAX_BODY_BYTES = 256 << 10
log = logging.getLogger("app.requests")


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
    """ASGI middleware: 413 for bodies over `max_bytes`, 403 for the upload route."""

    def __init__(self, app, max_bytes: int | None = None):
        self.app = app
        self.max_bytes = max_bytes if max_bytes is not None else max_body_bytes()

    async def _reply(self, send, status: int, message: str | dict) -> None:
        body = json.dumps(message if isinstance(message, dict) else {"detail": message}).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

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
                    return await self._reply(send, 413, f"Request body too large (limit {limit:,} bytes).")
        if scope.get("method") == "POST" and _noted(scope.get("path", "")):
            receive = await _note_session(scope, receive, limit)
            if receive is None:
                return await self._reply(send, 413, f"Request body too large (limit {limit:,} bytes).")
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
                        await self._reply(send, 413, f"Request body too large (limit {limit:,} bytes).")
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
    operator can still find a bug of ours, but no traceback (issue 36: 29 of 206 bad requests
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


def _noted(path: str) -> bool:
    """A route whose body names the visitor's session: a cancel, a queue join, a REST call."""
    path = path.rstrip("/")
    return path.endswith("/cancel") or path.endswith("/queue/join") or "/call/" in path


async def _note_session(scope, receive, limit: int):
    """Read a noted route's body (within the limit), note what it says about the visitor's session,
    and return a receive that replays the body to Gradio (None when it is over the limit):

    - a cancel: the visitor's cancel (app.serving.cancels);
    - a queue join or REST call: the session against the address it came from
      (app.serving.address_sessions), dropping that address's sessions over its cap; a REST call
      without a session hash is given one here, so that it too counts against its address."""
    from app.serving.address_sessions import address_sessions, drop_sessions
    from app.serving.cancels import note_cancel
    from app.serving.visitors import scope_address

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
    body = b"".join(chunks)
    path = scope.get("path", "").rstrip("/")
    try:
        data = json.loads(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        sh = data.get("session_hash")
        if path.endswith("/cancel"):
            if isinstance(sh, str) and sh:
                note_cancel(sh)
        else:
            if sh is None and "/call/" in path:
                sh = data["session_hash"] = uuid.uuid4().hex[:11]
                body = json.dumps(data).encode()
            if isinstance(sh, str) and sh:
                drop = address_sessions().note(scope_address(scope), sh)
                drop_sessions(getattr(scope.get("app"), "state_holder", None), drop)
    sent = False

    async def replay():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


def launch_limits() -> dict:
    """Keyword arguments for `Blocks.launch` that install the limits (serve() and the tests); the
    server's own timeouts (app.serving.timeouts) are installed on the way."""
    from starlette.middleware import Middleware

    from app.serving import timeouts
    from app.serving.memory import lifespan, sessions_max

    timeouts.install()

    return {"app_kwargs": {"middleware": [Middleware(BodyLimit)], "lifespan": lifespan},
            "max_file_size": "1kb", "state_session_capacity": sessions_max()}


#: Gradio's file cache (the CSV download of /stats lands there): every 5 minutes, delete what is
#: older than 10 minutes (a download link stays valid that long; the hourly prune let 116 MB of
#: CSV copies pile up in a minute of /stats calls, issue 28).
DELETE_CACHE = (300, 600)
