"""`python -m app [--host H] [--port P] [--device D]`: serve the Infilling studio (env INFILL_HOST /
INFILL_PORT / INFILL_DEVICE). A device setting that cannot be honoured stops start-up with one line."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from engine.errors import InfillError
from engine.loading.device import apply_device_flag

from . import serve


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, apply the device setting (stopping with one line when it cannot be honoured) and serve."""
    ap = argparse.ArgumentParser(prog="python -m app", description="Serve the Infilling studio.")
    ap.add_argument("--host", default=os.environ.get("INFILL_HOST", "127.0.0.1"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("INFILL_PORT", "7860")))
    ap.add_argument("--device", default=None, help="auto (CUDA when available), cpu or cuda; default $INFILL_DEVICE")
    a = ap.parse_args(argv)
    try:
        device = apply_device_flag(a.device)
    except InfillError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from app.serving import log_limits

    log_limits.install()  # repeated lines are rate-limited: abuse must not grow the log without bound
    logging.getLogger("app").info("models run on %s", device)
    serve(a.host, a.port)


if __name__ == "__main__":
    main()
