"""Files the page offers for download (the statistics CSV), kept in one bounded folder.

Gradio copies a returned file into its own cache (pruned by `Blocks.delete_cache`, set in
app.create), so our copy only has to live until the handler returns. Files are named by their
content (the same statistics reuse one file) and only the newest KEEP are kept, so /stats called
in a loop cannot fill the disk (one fresh file per call would).

Gradio's cache keys a copy by the file's content, so statistics that change with every stored run
would leave a fresh copy per download (304 files, 116 MB in a minute of /stats calls). `cached_export`
therefore reuses one file per filter for EXPORT_TTL seconds: at most one new copy per filter a
minute, and Gradio's cache is pruned every few minutes (app.serving.limits.DELETE_CACHE)."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path

KEEP = 8
EXPORT_TTL = 60.0  # seconds one filter's download file is reused
_cached: OrderedDict[Hashable, tuple[float, str]] = OrderedDict()
_cached_lock = threading.Lock()


def export_dir() -> Path:
    """This user's private folder for download files (created 0700 on first use)."""
    d = Path(tempfile.gettempdir()) / f"infill-exports-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    return d


def write_export(prefix: str, text: str, suffix: str = ".csv") -> str:
    """Write `text` to <export dir>/<prefix>-<content hash><suffix>; prune older files; return the path."""
    d = export_dir()
    data = text.encode()
    path = d / f"{prefix}-{hashlib.sha256(data).hexdigest()[:20]}{suffix}"
    tmp = d / f".{path.name}.{os.getpid()}.tmp"
    tmp.write_bytes(data)
    os.replace(tmp, path)  # readers never see a half-written file
    files = sorted((p for p in d.iterdir() if p.is_file() and not p.name.startswith(".")),
                   key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[KEEP:]:
        if old != path:
            old.unlink(missing_ok=True)
    return str(path)


def cached_export(key: Hashable, prefix: str, make_text: Callable[[], str], suffix: str = ".csv",
                  ttl: float = EXPORT_TTL, clock: Callable[[], float] = time.monotonic) -> str:
    """The download file for `key` (a filter): the one written less than `ttl` seconds ago while it
    still exists, else `make_text()` written anew (write_export)."""
    now = clock()
    with _cached_lock:
        hit = _cached.get(key)
    if hit is not None and now - hit[0] < ttl and os.path.exists(hit[1]):
        return hit[1]
    path = write_export(prefix, make_text(), suffix)
    with _cached_lock:
        _cached[key] = (now, path)
        _cached.move_to_end(key)
        while len(_cached) > KEEP:
            _cached.popitem(last=False)
    return path
