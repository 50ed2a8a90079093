"""Progress bars for long work (report, bench, eval, train, data fetch): what is being done and
an estimate of the time left, from tqdm.

On stderr, so --json output stays clean; off when stderr is not a terminal (logs, CI, pipes),
with `--quiet` (QUIET), and on every process but the main one when work is sharded
(lab.shard), so N processes draw one bar, not N.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable

QUIET = False  # set by --quiet (set_quiet)


def add_quiet_arg(p: argparse.ArgumentParser) -> None:
    """`--quiet`: no progress bars (they are off anyway when stderr is not a terminal)."""
    p.add_argument("--quiet", action="store_true", help="no progress bars (off anyway when stderr is not a terminal)")


def set_quiet(quiet: bool) -> None:
    """What --quiet asked for, for every bar this process draws from now on."""
    global QUIET
    QUIET = bool(quiet)


def enabled() -> bool:
    """Whether bars are drawn here: not --quiet, stderr a terminal, the main (rank 0) process."""
    return not QUIET and sys.stderr.isatty() and os.environ.get("RANK", "0") in ("", "0")


def bar(iterable: Iterable | None = None, total: int | None = None, desc: str = "", unit: str = "input"):
    """A tqdm bar (a silent one when not enabled()); use as an iterable or call .update(n)."""
    from tqdm import tqdm

    try:  # a terminal that reports no size (a bare pty) would get no bar at all from tqdm
        size = os.get_terminal_size(sys.stderr.fileno())
        ok = size.columns > 0 and size.lines > 0
    except (OSError, ValueError, AttributeError):
        ok = False
    size = {"dynamic_ncols": True} if ok else {"ncols": 100, "nrows": 20}
    return tqdm(iterable, total=total, desc=desc, unit=unit, disable=not enabled(), leave=False,
                file=sys.stderr, **size)
