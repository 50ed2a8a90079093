"""Progress bars on long work: drawn on a terminal (what is being done, the time left), never when
stderr is not a terminal, with --quiet, or on a process other than the main one."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import sys
import termios
from pathlib import Path

import pytest

from lab import progress
from tests.engine.test_cli import tiny_world  # noqa: F401 - the fixture: tiny AS-ARM + corpus

ROOT = Path(__file__).resolve().parents[2]


def _in_a_terminal(args: list[str], env: dict, cwd: Path) -> str:
    """Run `python ARGS` with a pseudo-terminal (80x24) as stdout and stderr; everything it wrote."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its stdio is the pty
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, *args], env)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


def test_bench_draws_a_bar_on_a_terminal_and_none_with_quiet(tiny_world):  # noqa: F811
    env = {**os.environ, "PYTHONPATH": str(ROOT), "INFILL_MODEL_DIRS": str(tiny_world / "models"),
           "INFILL_DATA_DIR": str(tiny_world / "data"), "TQDM_MININTERVAL": "0"}  # every update drawn: a fast run too
    for k in ("RANK", "WORLD_SIZE"):
        env.pop(k, None)
    args = ["-m", "engine", "bench", "assd", "--model", str(tiny_world / "models" / "text-asarm"), "--length", "24",
            "--samples", "3", "--k", "3", "--samplers", "sequential-cache,assd", "--json"]
    out = _in_a_terminal(args, env, tiny_world)
    assert "bench assd text-asarm: 2 samplers per input" in out, "the bar says what it is doing"
    assert "3/3 [" in out and "<" in out and "input/s" in out, "done of total, elapsed<time left, rate"
    quiet = _in_a_terminal([*args, "--quiet"], env, tiny_world)
    assert "samplers per input" not in quiet and '"rows"' in quiet


def test_bars_are_off_when_not_a_terminal_quiet_or_not_the_main_process(monkeypatch):
    monkeypatch.setattr(progress, "QUIET", False)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert progress.enabled()
    monkeypatch.setenv("RANK", "1")
    assert not progress.enabled(), "only rank 0 draws"
    monkeypatch.setenv("RANK", "0")
    progress.set_quiet(True)
    assert not progress.enabled() and progress.bar(range(2)).disable
    progress.set_quiet(False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not progress.enabled()


@pytest.mark.parametrize("argv", [["bench", "assd"], ["bench", "self-spec"], ["eval"], ["report"], ["train"],
                                  ["data", "fetch", "text"]])
def test_every_long_command_takes_quiet(argv, capsys):
    from engine.cli import main

    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0 and "--quiet" in capsys.readouterr().out
