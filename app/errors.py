"""Any exception as a message for the page: InfillError and storage messages verbatim, anything
else a short sentence (logged with its stack trace, never shown)."""

from __future__ import annotations

import logging

from engine.errors import InfillError
from storage import StorageInputError

log = logging.getLogger("app")

def readable(e: BaseException) -> str:
    """A message for the page: InfillError / storage messages verbatim, never a stack trace."""
    if isinstance(e, (InfillError, StorageInputError)):
        return str(e)
    log.exception("unexpected error", exc_info=e)
    return f"Something went wrong on the server ({type(e).__name__}). The run was not completed."
