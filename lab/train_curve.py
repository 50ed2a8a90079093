"""The held-out acceptance curve of a PTP head while it trains, and the rule that stops a head whose
curve has gone flat (`python -m engine train --kind ptp --curve-every ... --stop-when-flat W G`).

Why: on a lent GPU the jobs' minutes are fixed in advance (lab/campaign_plan.py); a head that
no longer learns should stop, save, and hand its minutes on to the next job (lab/campaign.py),
and the curve is the evidence of how many minutes a head still uses. A point is the model card's
number (`train_ptp.acceptance`: mean expected acceptance 1 - TV(p, q) of rows 2..k of a round, mask
rate 0.95) on a fixed small batch of the valid split: the same windows, masks and uniforms at every
point, so two points differ only by the weights.
"""

from __future__ import annotations

import argparse
import time

import torch


def every_arg(s: str) -> tuple[str, float]:
    """--curve-every: `30s` (seconds of the run) or `50` (optimizer steps) between points."""
    try:
        if s.endswith("s"):
            v = float(s[:-1])
            unit = "seconds"
        else:
            v = int(s)
            unit = "steps"
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected steps (50) or seconds (30s), got {s!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"--curve-every must be positive, got {s!r}")
    return unit, v


def add_curve_args(ap: argparse.ArgumentParser) -> None:
    """The curve's and the stop rule's flags of `python -m engine train` (ptp only)."""
    ap.add_argument("--curve-every", type=every_arg, default=None, metavar="N|Ns",
                    help="ptp: measure the held-out acceptance curve every N steps or every N seconds (30s); "
                         "a point at the start and at the end too; logged and kept in train_state.json")
    ap.add_argument("--curve-windows", type=int, default=8,
                    help="ptp: held-out valid windows per curve point (a fixed batch, 4 windows a pass)")
    ap.add_argument("--stop-when-flat", nargs=2, type=float, default=None, metavar=("WINDOW", "MIN_GAIN"),
                    help="ptp: stop (and save) once the best of the last WINDOW curve points is less than "
                         "MIN_GAIN above the point before them (needs --curve-every)")
    ap.add_argument("--stop-min-points", type=int, default=6,
                    help="--stop-when-flat: never stop before the curve has this many points (the start's included)")


def check_curve_args(a: argparse.Namespace, ap: argparse.ArgumentParser) -> None:
    """Refuse curve flags the run cannot honour."""
    if (a.curve_every or a.stop_when_flat) and a.kind != "ptp":
        ap.error("--curve-every and --stop-when-flat are for --kind ptp (the acceptance curve of a head)")
    if a.stop_when_flat:
        if not a.curve_every:
            ap.error("--stop-when-flat needs --curve-every (the points it reads)")
        w = a.stop_when_flat[0]
        if w < 1 or w != int(w):
            ap.error(f"--stop-when-flat WINDOW must be a whole number >= 1, got {w}")


def flat(curve: list[float], window: int, min_gain: float, min_points: int) -> bool:
    """The stop rule, on the acceptance values so far (oldest first): True when the best of the last
    `window` points is less than `min_gain` above the point just before them (a curve that stopped
    rising, or fell). Never before `min_points` points, nor with fewer than window + 1. Taking the
    best of the window, not its last point, keeps a run that still rises through the jitter of SGD."""
    if len(curve) < max(min_points, window + 1):
        return False
    return window_gain(curve, window) < min_gain


def window_gain(curve: list[float], window: int) -> float:
    """How far the best of the last `window` points rose above the point just before them."""
    return max(curve[-window:]) - curve[-window - 1]


class Curve:
    """The run's curve: when the next point is due, measuring it, the stop rule, and what
    train_state.json keeps (points of a --resume'd run's earlier part included)."""

    def __init__(self, *, head, valid: torch.Tensor, seq_len: int, bos_id: int, every: tuple[str, float],
                 windows: int = 8, stop: tuple[float, float] | None = None, min_points: int = 6,
                 prior: dict | None = None):
        self.head, self.valid, self.seq_len, self.bos_id = head, valid, seq_len, bos_id
        self.unit, self.every = every
        self.windows, self.min_points = windows, min_points
        self.stop = (int(stop[0]), float(stop[1])) if stop else None
        self.points: list[dict] = list((prior or {}).get("points", []))
        self.stopped: dict | None = None
        self._last: tuple[int, float] | None = None  # (step, run seconds) of this run's last point

    def due(self, step: int, seconds: float) -> bool:
        """Whether a point is due after `step` at `seconds` into this run."""
        if self._last is None:
            return True
        since = step - self._last[0] if self.unit == "steps" else seconds - self._last[1]
        return since >= self.every

    def measure(self, step: int, tokens: int, seconds: float, offset_s: float = 0.0, lr: float | None = None) -> dict:
        """Measure one point (the head's acceptance on the fixed valid batch), keep it and log it.
        `seconds`: into this run; `offset_s`: the seconds of the run(s) it resumes."""
        from .train_ptp import acceptance  # the model card's computation (train_ptp imports the models)

        t = time.time()
        res = acceptance(self.head, self.valid, self.seq_len, self.bos_id, self.windows)
        point = {"step": step, "tokens": tokens, "seconds": round(offset_s + seconds, 1),
                 "acceptance": round(res["accept_rows_2_to_k_head"], 5), "lr": lr, "eval_s": round(time.time() - t, 2)}
        if self.points and self.points[-1]["step"] == step:  # a resumed run's first point repeats the last
            self.points[-1] = point
        else:
            self.points.append(point)
        self._last = (step, seconds)
        print(f"curve step {step} tokens {tokens} seconds {point['seconds']:.0f} acceptance {point['acceptance']:.4f}"
              f" (held-out valid, {res['windows']} windows, {point['eval_s']:.1f}s)", flush=True)
        return point

    def flat_now(self) -> bool:
        """Apply the stop rule (if one was asked for) to the curve so far; records why it stopped."""
        if self.stop is None:
            return False
        window, min_gain = self.stop
        values = [p["acceptance"] for p in self.points]
        if not flat(values, window, min_gain, self.min_points):
            return False
        gain = window_gain(values, window)
        last = self.points[-1]
        self.stopped = {"step": last["step"], "tokens": last["tokens"], "seconds": last["seconds"],
                        "reason": f"gained {gain:+.4f} < {min_gain} over the last {window} points"}
        print(f"stop when flat: {self.stopped['reason']} (step {last['step']})", flush=True)
        return True

    def state(self) -> dict:
        """train_state.json's fields: the curve with its settings, and why the run stopped early (or null)."""
        return {"acceptance_curve": {
            "what": "mean 1 - TV(p, q) of rows 2..k, fixed held-out valid batch, mask rate 0.95",
            "every": f"{self.every:g}s" if self.unit == "seconds" else f"{self.every:g} step{'' if self.every == 1 else 's'}",
            "windows": self.windows,
            "seq_len": self.seq_len,
            "stop_when_flat": None if self.stop is None else {"window": self.stop[0], "min_gain": self.stop[1],
                                                               "min_points": self.min_points},
            "points": self.points}, "stopped_flat": self.stopped}

