"""A rate limit on repeated log lines: abuse must not grow the log without bound (an
unreadable metrics.json logged a warning on every page event, dozens a second).

`RepeatLimit` lets through at most `burst` records with the same logger, level and message
template per `window` seconds; the first one let through after a window with suppressed records
says how many were left out. Installed on the server's log handlers by `python -m app`."""

from __future__ import annotations

import logging
import threading
import time

#: templates remembered at most (all forgotten at once past it: a flood of distinct templates is
#: a bug of ours, not a visitor's doing)
_KEYS_MAX = 4096


class RepeatLimit(logging.Filter):
    """At most `burst` records per (logger, level, template) every `window` seconds."""

    def __init__(self, burst: int = 5, window: float = 60.0, clock=time.monotonic):
        super().__init__()
        self.burst, self.window, self.clock = burst, window, clock
        self._lock = threading.Lock()
        self._seen: dict[tuple, list] = {}  # key -> [window start, passed, suppressed]

    def filter(self, record: logging.LogRecord) -> bool:
        """Whether this record is logged (the first after a window with some left out says how many)."""
        key = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        with self._lock:
            if len(self._seen) > _KEYS_MAX:
                self._seen.clear()
            st = self._seen.get(key)
            if st is None or now - st[0] >= self.window:
                left_out = st[2] if st is not None else 0
                self._seen[key] = [now, 1, 0]
                if left_out:
                    record.msg = f"{record.msg} (and {left_out} more like this in the last {self.window:g} s, not logged)"
                return True
            if st[1] < self.burst:
                st[1] += 1
                return True
            st[2] += 1
            return False


def install(limit: RepeatLimit | None = None) -> RepeatLimit:
    """Put one RepeatLimit on the root logger's handlers and on uvicorn's error logger (whose
    records do not reach the root)."""
    limit = limit or RepeatLimit()
    for h in logging.getLogger().handlers:
        if not any(isinstance(f, RepeatLimit) for f in h.filters):
            h.addFilter(limit)
    uv = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, RepeatLimit) for f in uv.filters):
        uv.addFilter(limit)
    return limit
