"""The server's own timeouts: a request's headers, its body, and an idle keep-alive connection.

Why: uvicorn (under Gradio) arms a timer only between two requests (keep-alive, 5 s); a client
that opens a connection and sends half a request line, or a body shorter than its Content-Length,
held its connection and its server task forever (40 such connections all still held
after 10 s). Here every connection must deliver a request's headers within
INFILL_HEADER_TIMEOUT seconds (default 10) of its first byte (or of the connection), and the body
within INFILL_BODY_TIMEOUT seconds (default 30) of the headers; an idle keep-alive connection is
closed after INFILL_KEEPALIVE_TIMEOUT seconds (default 5). A late request gets 408 and its
connection is closed, with one (rate-limited) log line. Long answers (the event streams of runs)
are not affected: the timers stop once the request has arrived.

Gradio builds uvicorn's Config itself and passes no server settings through `launch`, so
install() makes uvicorn build its configurations with this protocol and keep-alive time."""

from __future__ import annotations

import asyncio
import logging

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from engine.envvars import env_int

log = logging.getLogger("app.timeouts")

_408 = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


def header_timeout() -> int:
    """Seconds a request's headers may take to arrive (INFILL_HEADER_TIMEOUT, default 10)."""
    return env_int("INFILL_HEADER_TIMEOUT", 10)


def body_timeout() -> int:
    """Seconds a request's body may take after its headers (INFILL_BODY_TIMEOUT, default 30)."""
    return env_int("INFILL_BODY_TIMEOUT", 30)


def keepalive_timeout() -> int:
    """Seconds an idle keep-alive connection stays open (INFILL_KEEPALIVE_TIMEOUT, default 5)."""
    return env_int("INFILL_KEEPALIVE_TIMEOUT", 5)


class TimedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on the headers and on the body of every request."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A new connection: its first request's headers are due within header_timeout()."""
        super().connection_made(transport)
        self._phase: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._arm("headers", header_timeout())

    def _arm(self, phase: str, seconds: float) -> None:
        self._disarm()
        self._phase = phase
        self._timer = self.loop.call_later(seconds, self._expire, phase, seconds)

    def _disarm(self) -> None:
        if getattr(self, "_timer", None) is not None:
            self._timer.cancel()
        self._timer, self._phase = None, None

    def data_received(self, data: bytes) -> None:
        """Bytes arrived: uvicorn parses them, then the deadline follows what is still awaited."""
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        """An answer went out: uvicorn's keep-alive timer takes over unless a request is under way."""
        super().on_response_complete()  # uvicorn's keep-alive timer watches the idle connection now
        if not self.transport.is_closing():
            self._follow()

    def connection_lost(self, exc: Exception | None) -> None:
        """The connection closed: no deadline is left to watch."""
        self._disarm()
        super().connection_lost(exc)

    def _follow(self) -> None:
        """Arm the timer for what the connection waits for now: the rest of the headers, the body,
        or nothing (the request has arrived; an idle connection is keep-alive's)."""
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            if self._phase != "body":
                self._arm("body", body_timeout())
        elif state is h11.IDLE and self.conn.trailing_data[0]:  # part of a request's head has come
            if self._phase != "headers":
                self._arm("headers", header_timeout())
        elif state is not h11.IDLE or self._phase != "headers" or self.cycle is not None:
            self._disarm()

    def _expire(self, phase: str, seconds: float) -> None:
        self._timer = None
        if self._phase != phase or self.transport.is_closing():
            return
        self._phase = None
        host = self.client[0] if self.client else "?"
        log.info("closed a connection from %s: its request's %s did not arrive within %s s", host, phase, seconds)
        if self.cycle is None or not self.cycle.response_started:
            self.transport.write(_408)
        self.transport.close()


class _Config(uvicorn.Config):
    """uvicorn's Config with the timed protocol, the keep-alive time and no proxy headers (install())."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("http", TimedH11Protocol)
        kwargs.setdefault("timeout_keep_alive", keepalive_timeout())
        # the peer address stays the socket's: which proxies' X-Forwarded-For is believed is the
        # operator's INFILL_TRUSTED_PROXIES (app.serving.visitors), not uvicorn's default of
        # believing any request from 127.0.0.1
        kwargs.setdefault("proxy_headers", False)
        super().__init__(*args, **kwargs)


def install() -> None:
    """Make the uvicorn server that Gradio's launch builds use these timeouts (idempotent)."""
    import gradio.http_server as gradio_server

    if not issubclass(gradio_server.uvicorn.Config, _Config):
        gradio_server.uvicorn.Config = _Config
