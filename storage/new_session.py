"""A session not stored yet, checked on construction: what a recorded run's first write inserts.

A leaf of storage: the recorder (storage/recorder.py) and the store (storage/repository.py) both
name it, and neither needs the other for it.
"""

from __future__ import annotations

import json
from typing import Any

from storage.models import SessionRow, utcnow
from storage.validation import MAX_SPANS_CHARS, MAX_TEXT_CHARS, check_str, json_text


class NewSession:
    """A session not stored yet: `record_run(..., session=NewSession(...))` inserts it in the same
    transaction as its first run, so a process killed mid-run (or mid-write) never leaves a
    session without runs. Checked on construction."""

    def __init__(self, *, domain: str, model: str, text: str, spans: Any) -> None:
        check_str("domain", domain, 32, allow_empty=False)
        check_str("model", model, 200, allow_empty=False)
        check_str("text", text, MAX_TEXT_CHARS)
        json_text("spans", spans, MAX_SPANS_CHARS)
        self.domain, self.model, self.text = domain, model, text
        self.spans = json.loads(json.dumps(spans))

    def row(self, share_id: str) -> SessionRow:
        """The sessions-table row under `share_id`."""
        return SessionRow(share_id=share_id, domain=self.domain, model=self.model, text=self.text,
                          spans=self.spans, created_at=utcnow())
