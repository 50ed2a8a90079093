"""The GPU campaign's plan, fixed in advance: what travels to the lent machine, which models train
there for what share of the minutes, and what comes back, each in rank order.

Why one table: a loan is 15 minutes, one command at most 10 and 64 MiB each way, so every choice
(what to carry, how long each job trains, which files are worth bringing back) is made here on the
CPU, tested by the dry run (tests/lab/test_campaign.py), and read by docs/TRAINING.md.

Sizes: the text AS-ARM is the one model every page of the studio uses first; its size is the largest
measured that still decodes at >= 100 tokens/s (cached sequential, one CPU thread) and fits the 48 MB
text-AS-ARM folder in bf16 (SIZE_CHOICE). A new size trains from scratch once; `run --text-size
bundled` keeps the bundled size and continues its weights instead (--init).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Job:
    """One training run of the campaign. `share`: its fraction of the training minutes (fixed in
    advance). `init`: continue from the bundled folder of that name when the architecture is the
    same (else a new size starts fresh, once). `teacher`: a PTP head's AS-ARM, a job name (its
    new weights when that job finished) or a bundled name. `size`: hidden, layers, heads, ffn."""

    name: str
    kind: str
    domain: str
    share: float
    size: tuple[int, int, int, int] | None = None
    init: str | None = None
    teacher: str | None = None
    extra: tuple[str, ...] = ()
    seq_len: int = 256


#: hidden, layers, heads, ffn. `bench calls` (one thread, CPU ms of the cached one-token call, median
#: of 10, two rounds interleaved, random weights, load 17-20) on this project's CPU: 320x6 (10.0M
#: parameters) 5.5-6.3 ms = 160-180 tokens/s; 384x8 (17.3M, 34.7 MB in bf16) 8.6-8.7 ms = 115;
#: 448x8 (23.0M, 46.0 MB) 10.3-10.5 ms = 95-97, under the 100 tokens/s floor. Chosen: 384x8.
SIZE_CHOICE = {"bundled": (320, 6, 5, 1280), "chosen": (384, 8, 6, 1536)}

#: the bundled one-pass heads' settings (assets/models/text-ptp1/config.json); --heads follows the teacher
PTP_ONEPASS = ("--ptp-mode", "onepass", "--k", "5", "--window", "0", "--prev-rank", "128", "--rate-min", "0.7",
               "--layers", "3", "--ffn", "1024", "--lr", "2e-3", "--min-lr", "0.1")

#: a PTP job's stop rule (engine/lab/train_curve.py): the held-out acceptance curve gets about
#: PTP_CURVE_POINTS points over the job's first share; the head stops (and saves, and hands its
#: seconds on) once the best of the last WINDOW points is less than MIN_GAIN above the point before
#: them, never before PTP_STOP_MIN_POINTS points (the start's included)
PTP_CURVE_POINTS = 10
PTP_STOP_WHEN_FLAT = (3, 0.003)
PTP_STOP_MIN_POINTS = 6


def ptp_curve_args(train_s: float, dry_run: bool = False) -> list[str]:
    """The curve and stop-rule flags of a PTP job that trains about `train_s` seconds (the dry run:
    a point every step, its three steps never reach the rule)."""
    every = "1" if dry_run else f"{max(2.0, train_s / PTP_CURVE_POINTS):.1f}s"
    w, gain = PTP_STOP_WHEN_FLAT
    return ["--curve-every", every, "--stop-when-flat", str(w), str(gain), "--stop-min-points", str(PTP_STOP_MIN_POINTS)]


def share_of_pool(pool_s: float, jobs: tuple[Job, ...], i: int) -> float:
    """The part of the seconds earlier jobs left unused (`pool_s`) that job i is given on top of its
    share: in proportion to its share among the jobs still to run (i and after); the last job, all."""
    later = sum(j.share for j in jobs[i:])
    return pool_s if i == len(jobs) - 1 or later <= 0 else pool_s * jobs[i].share / later


#: the GPU campaign's jobs, in priority order (text first: the default domain; then code, then protein)
GPU_JOBS: tuple[Job, ...] = (
    Job("text-asarm", "asarm", "text", 0.45, size=SIZE_CHOICE["chosen"], init="text-asarm"),
    Job("text-ptp1", "ptp", "text", 0.12, teacher="text-asarm", init="text-ptp1",
        extra=(*PTP_ONEPASS, "--heads", str(SIZE_CHOICE["chosen"][2]))),
    Job("code-asarm", "asarm", "code", 0.12, size=SIZE_CHOICE["bundled"], init="code-asarm"),
    Job("code-ptp", "ptp", "code", 0.08, teacher="code-asarm", init="code-ptp", extra=(*PTP_ONEPASS, "--heads", "5")),
    Job("protein-ptp", "ptp", "protein", 0.08, teacher="protein-asarm", extra=(*PTP_ONEPASS, "--heads", "5")),
    Job("text-hybrid", "hybrid", "text", 0.06, size=(320, 4, 5, 1280), init="text-hybrid"),
    Job("code-hybrid", "hybrid", "code", 0.05, size=(320, 4, 5, 1280), init="code-hybrid"),
    Job("protein-hybrid", "hybrid", "protein", 0.04, size=(320, 4, 5, 1280), init="protein-hybrid"),
)

#: the dry run's jobs: the same kinds and wiring at a toy size
DRY_JOBS: tuple[Job, ...] = (
    Job("text-asarm", "asarm", "text", 0.6, size=(16, 2, 2, 32), init="text-asarm", seq_len=32),
    Job("text-ptp1", "ptp", "text", 0.4, teacher="text-asarm", init="text-ptp1",
        extra=("--ptp-mode", "onepass", "--k", "3", "--layers", "1", "--heads", "2", "--ffn", "32"), seq_len=32),
)


@dataclass(frozen=True)
class Travel:
    """One thing carried to the GPU machine, in rank order, within the 64 MiB: a bundled model
    folder (compressed) or a domain's training tokens (a byte cap on the compressed shards)."""

    what: str  # "model" | "tokens"
    name: str  # model folder name or domain
    cap_mib: float = 0.0  # tokens: at most this much compressed


#: what travels, best first: the speed table's AS-ARMs and the text AS-ARM's data come first
TRAVEL: tuple[Travel, ...] = (
    Travel("model", "text-asarm"),
    Travel("tokens", "text", cap_mib=11.0),
    Travel("model", "code-asarm"),
    Travel("model", "protein-asarm"),
    Travel("model", "text-ptp1"),
    Travel("tokens", "code", cap_mib=3.0),
    Travel("tokens", "protein", cap_mib=2.0),
)

TREE_LIMIT_MIB = 64.0
RETURN_FILES, RETURN_FILE_MIB, RETURN_TOTAL_MIB = 8, 16.0, 64.0


@dataclass
class Budget:
    """The campaign's seconds: the speed table first, then training (shared by the jobs), then the
    evaluations; `reserve_s` is kept for packing what comes back."""

    total_s: float
    speed_s: float
    eval_s: float
    reserve_s: float
    step_cap_s: dict[str, float] = field(default_factory=dict)

    def train_s(self) -> float:
        """What training gets: the rest."""
        return max(0.0, self.total_s - self.speed_s - self.eval_s - self.reserve_s)


def gpu_budget(total_s: float = 480.0) -> Budget:
    """8 minutes: 100 s of speed table, 45 s of evaluations, 20 s to pack; training gets the rest."""
    return Budget(total_s, speed_s=100.0, eval_s=45.0, reserve_s=20.0,
                  step_cap_s={"bench-assd": 40.0, "bench-calls": 20.0, "eval": 30.0, "fills": 30.0})


def with_text_size(jobs: tuple[Job, ...], which: str) -> tuple[Job, ...]:
    """The plan with the text AS-ARM (and its PTP head's heads) at SIZE_CHOICE[which]."""
    from dataclasses import replace

    size = SIZE_CHOICE[which]
    out = []
    for j in jobs:
        if j.name == "text-asarm":
            j = replace(j, size=size)
        elif j.name == "text-ptp1":
            j = replace(j, extra=(*PTP_ONEPASS, "--heads", str(size[2])))
        out.append(j)
    return tuple(out)


def dry_budget(total_s: float = 120.0) -> Budget:
    """The CPU dry run: every step, each capped at a share of the total (a loaded CPU is slow to
    start processes; the tiny jobs stop after a few steps, so the total is only an upper bound)."""
    return Budget(total_s, speed_s=0.35 * total_s, eval_s=0.3 * total_s, reserve_s=0.02 * total_s,
                  step_cap_s={"bench-assd": 0.2 * total_s, "bench-calls": 0.15 * total_s, "eval": 0.15 * total_s,
                              "fills": 0.1 * total_s})


def return_rank(jobs: tuple[Job, ...]) -> list[str]:
    """What comes back, best first: the campaign's record (one JSON-lines file), the archive of
    logs and JSON, then each trained model in job order (text AS-ARM first)."""
    return ["campaign.jsonl", "logs.tar.xz", *[j.name for j in jobs]]
