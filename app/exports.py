"""Files the page offers for download (the statistics CSV), kept in one bounded folder.

Gradio copies a returned file into its own cache (pruned by `Blocks.delete_cache`, set in
app.create), so our copy only has to live until the handler returns. Files are named by their
content (the same statistics reuse one file) and only the newest KEEP are kept, so /stats called
in a loop cannot fill the disk (it used to leave one mkstemp file per call)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

KEEP = 8


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
