"""`python -m app [--host H] [--port P]`: serve the Infilling studio (env INFILL_HOST / INFILL_PORT)."""

from __future__ import annotations

import argparse
import logging
import os

from . import serve


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m app", description="Serve the Infilling studio.")
    ap.add_argument("--host", default=os.environ.get("INFILL_HOST", "127.0.0.1"))
    ap.add_argument("--port", type=int, default=int(os.environ.get("INFILL_PORT", "7860")))
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    serve(a.host, a.port)


if __name__ == "__main__":
    main()
