"""`python -m app [--host H] [--port P] [--device D] [--precision P]`: serve the Infilling studio (env
INFILL_HOST / INFILL_PORT / INFILL_DEVICE / INFILL_PRECISION). A device or precision setting that cannot
be honoured stops start-up with one line."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from engine.cli import add_device_arg, apply_device_args
from engine.errors import InfillError

from . import serve


def main(argv: list[str] | None = None) -> None:
    """Parse the flags, apply the device and precision settings (stopping with one line when it cannot be honoured) and serve."""
    ap = argparse.ArgumentParser(prog="python -m app", description="Serve the Infilling studio.")
    ap.add_argument("--host", default=os.environ.get("INFILL_HOST", "127.0.0.1"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("INFILL_PORT", "7860")))
    add_device_arg(ap)
    a = ap.parse_args(argv)
    try:
        device = apply_device_args(a)
    except InfillError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from app.serving import log_limits

    log_limits.install()  # repeated lines are rate-limited: abuse must not grow the log without bound
    from engine.loading.precision import resolve_precision

    logging.getLogger("app").info("models run on %s (CPU matmuls: %s)", device, resolve_precision())
    serve(a.host, a.port)


if __name__ == "__main__":
    main()
