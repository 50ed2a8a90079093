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


@dataclass(frozen=True, kw_only=True)
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
    auto_size: bool = False  # the size is picked on the GPU from TEXT_SIZES by measured tokens/s
    batch: int | None = None  # sequences a step; None: --batch auto (the probe's choice)
    overhead_s: float | None = None  # start-up, the final save, outside --minutes (None: JOB_OVERHEAD_S)


#: hidden, layers, heads, ffn. `bench calls` (one thread, CPU ms of the cached one-token call, median
#: of 10, two rounds interleaved, random weights, load 17-20) on this project's CPU: 320x6 (10.0M
#: parameters) 5.5-6.3 ms = 160-180 tokens/s; 384x8 (17.3M, 34.7 MB in bf16) 8.6-8.7 ms = 115;
#: 448x8 (23.0M, 46.0 MB) 10.3-10.5 ms = 95-97, under the 100 tokens/s floor. Chosen: 384x8.
SIZE_CHOICE = {"bundled": (320, 6, 5, 1280), "chosen": (384, 8, 6, 1536)}

#: the bundled one-pass heads' settings (assets/models/text-ptp1/config.json); --heads follows the teacher.
#: No block since 2026-11-29 (one that morning): on a 2-core CPU a drafting round is bound by its small
#: operations; with none the round drafts in 3.5-5 ms against 5.5-7 for one block, at 0.50 acceptance against
#: 0.52 on text (docs/DESIGN.md §7.1). No output layer since 2026-12-02: the round reads the gated low-rank
#: term only, 0.8 ms against 1.1-1.2 on the AMX Xeon, and bench assd read it 0-6% faster at 0.48 acceptance
#: against 0.50 on text (docs/DESIGN.md §7.1, "A head without its output layer"). Rank 128 for a head
#: started afresh; a warm start keeps the rank of the head it continues (Campaign.job_args)
PTP_ONEPASS = ("--ptp-mode", "onepass", "--k", "5", "--window", "0", "--prev-rank", "128", "--no-output-layer",
               "--rate-min", "0.7", "--layers", "0", "--ffn", "1024", "--lr", "2e-3", "--min-lr", "0.1")

#: a PTP job's stop rule (lab/train_curve.py): the held-out acceptance curve gets about
#: PTP_CURVE_POINTS points over the job's first share; the head stops (and saves, and hands its
#: seconds on) once the best of the last WINDOW points is less than MIN_GAIN above the point before
#: them, never before PTP_STOP_MIN_POINTS points (the start's included)
PTP_CURVE_POINTS = 10
PTP_STOP_WHEN_FLAT = (3, 0.003)
PTP_STOP_MIN_POINTS = 6


def ptp_curve_args(train_s: float, dry_run: bool = False, stop: bool = True) -> list[str]:
    """The curve and stop-rule flags of a PTP job that trains about `train_s` seconds (the dry run:
    a point every step, its three steps never reach the rule). Without `stop` (a plan of one job:
    no later job would get the seconds a stop saves) the curve alone."""
    every = "1" if dry_run else f"{max(2.0, train_s / PTP_CURVE_POINTS):.1f}s"
    if not stop:
        return ["--curve-every", every]
    w, gain = PTP_STOP_WHEN_FLAT
    return ["--curve-every", every, "--stop-when-flat", str(w), str(gain), "--stop-min-points", str(PTP_STOP_MIN_POINTS)]


def share_of_pool(pool_s: float, jobs: tuple[Job, ...], i: int) -> float:
    """The part of the seconds earlier jobs left unused (`pool_s`) that job i is given on top of its
    share: in proportion to its share among the jobs still to run (i and after); the last job, all."""
    later = sum(j.share for j in jobs[i:])
    return pool_s if i == len(jobs) - 1 or later <= 0 else pool_s * jobs[i].share / later


#: the text AS-ARM sizes the loan picks from, smallest first (hidden, layers, heads, ffn): every one
#: decodes at >= 100 tokens/s on one CPU thread (SIZE_CHOICE's measurements) and fits the 48 MB folder
TEXT_SIZES: tuple[tuple[int, int, int, int], ...] = ((320, 6, 5, 1280), (384, 6, 6, 1536), (384, 8, 6, 1536))
#: compute-optimal training: about this many tokens per parameter (Hoffmann et al. 2022)
TOKENS_PER_PARAM = 20.0
VOCAB = 4096  # the text tokenizer's (assets/tokenizers/text)


def asarm_params(size: tuple[int, int, int, int], vocab: int = VOCAB) -> int:
    """Trainable parameters of an AS-ARM of this size (engine/models/asarm_core.py: embedding, query
    embedding, blocks with biased MLP and two LayerNorms, final norm, untied head)."""
    d, layers, _, ffn = size
    block = 4 * d * d + d * ffn + ffn + ffn * d + d + 4 * d
    return vocab * d + d + layers * block + 2 * d + d * vocab


def train_flops_per_token(size: tuple[int, int, int, int], seq_len: int = 256, vocab: int = VOCAB) -> float:
    """Training FLOPs per token (forward + backward = 3x forward): both streams run every block (2x
    the block matmuls), the head runs on the query stream, attention reads seq_len keys per row."""
    d, layers, _, ffn = size
    block = 4 * d * d + 2 * d * ffn
    return 6.0 * (2 * layers * block + d * vocab) + 3.0 * layers * 2 * 4 * seq_len * d


def choose_text_size(tokens_per_s: float, probed: tuple[int, int, int, int], train_s: float,
                     seq_len: int = 256, sizes: tuple[tuple[int, int, int, int], ...] = TEXT_SIZES) -> dict:
    """The largest of TEXT_SIZES that sees about TOKENS_PER_PARAM tokens per parameter in train_s at
    the measured rate (scaled from the probed size by FLOPs per token); else the smallest. Why: a
    model too large for its tokens stops short of its loss, one too small wastes the loan."""
    rows = []
    for size in sizes:
        rate = tokens_per_s * train_flops_per_token(probed, seq_len) / train_flops_per_token(size, seq_len)
        tokens = rate * train_s
        rows.append({"size": list(size), "params": asarm_params(size), "tokens_per_s": round(rate),
                     "tokens": round(tokens), "tokens_per_param": round(tokens / asarm_params(size), 1)})
    fit = [r for r in rows if r["tokens_per_param"] >= TOKENS_PER_PARAM]
    pick = fit[-1] if fit else rows[0]
    return {"size": tuple(pick["size"]), "rows": rows, "rule": f">= {TOKENS_PER_PARAM:g} tokens/parameter"}


#: the default plan: ONE text AS-ARM, every training second of the loan (the studio's first model;
#: its PTP head is trained afterwards on the CPU, lab/train_ptp.py). Other jobs: `--plan full`.
TEXT_JOBS: tuple[Job, ...] = (
    Job(name="text-asarm", kind="asarm", domain="text", share=1.0, size=TEXT_SIZES[-1], init="text-asarm", auto_size=True),
)

def ptp_head_name(domain: str) -> str:
    """The bundled PTP head of a domain (engine.inputs.domains, `drafters`; else `<domain>-ptp`)."""
    from engine.inputs.domains import DOMAINS

    chosen = dict(DOMAINS[domain].drafters).get("ptp") if domain in DOMAINS else None
    return chosen or f"{domain}-ptp"


def ptp_jobs(domain: str = "text") -> tuple[Job, ...]:
    """`--plan ptp` (a loan spent on better drafts): a domain's PTP head alone, distilled from the
    bundled AS-ARM of the domain and continued from the bundled head (the same size: its `--heads`
    are read off the teacher), every training second; the AS-ARM is left as it is, so the head it
    drafts for stays its own. Batch 32, not probed: the step is host-bound (the rounds are cut on the
    host, ~200K tokens/s on this CPU at any batch), so the probe would pick the smallest batch and
    the noisiest steps. Overhead 40 s: two models to load and a held-out curve point at the end."""
    head = ptp_head_name(domain)
    return (Job(name=head, kind="ptp", domain=domain, share=1.0, teacher=f"{domain}-asarm", init=head,
                extra=PTP_ONEPASS, batch=32, overhead_s=40.0),)


#: the older plan of every domain and head, in priority order (text first; then code, then protein)
GPU_JOBS: tuple[Job, ...] = (
    Job(name="text-asarm", kind="asarm", domain="text", share=0.45, size=SIZE_CHOICE["chosen"], init="text-asarm"),
    Job(name="text-ptp1", kind="ptp", domain="text", share=0.12, teacher="text-asarm", init="text-ptp1",
        extra=(*PTP_ONEPASS, "--heads", str(SIZE_CHOICE["chosen"][2]))),
    Job(name="code-asarm", kind="asarm", domain="code", share=0.12, size=SIZE_CHOICE["bundled"], init="code-asarm"),
    # a warm start keeps the bundled head's rank (code-ptp's is 64 since 2026-12-02; Campaign.job_args)
    Job(name="code-ptp", kind="ptp", domain="code", share=0.08, teacher="code-asarm", init="code-ptp",
        extra=(*PTP_ONEPASS, "--heads", "5")),
    Job(name="protein-ptp", kind="ptp", domain="protein", share=0.08, teacher="protein-asarm",
        extra=(*PTP_ONEPASS, "--heads", "5")),
    Job(name="text-hybrid", kind="hybrid", domain="text", share=0.06, size=(320, 4, 5, 1280), init="text-hybrid"),
    Job(name="code-hybrid", kind="hybrid", domain="code", share=0.05, size=(320, 4, 5, 1280), init="code-hybrid"),
    Job(name="protein-hybrid", kind="hybrid", domain="protein", share=0.04, size=(320, 4, 5, 1280), init="protein-hybrid"),
)

#: the dry run's jobs: the same kinds and wiring at a toy size (the AS-ARM's size probed and picked
#: from DRY_SIZES, as the text plan does from TEXT_SIZES)
DRY_SIZES: tuple[tuple[int, int, int, int], ...] = ((16, 2, 2, 32), (24, 2, 2, 48))
DRY_JOBS: tuple[Job, ...] = (
    Job(name="text-asarm", kind="asarm", domain="text", share=0.6, size=DRY_SIZES[0], init="text-asarm", seq_len=32,
        auto_size=True),
    Job(name="text-ptp1", kind="ptp", domain="text", share=0.4, teacher="text-asarm", init="text-ptp1",
        extra=("--ptp-mode", "onepass", "--k", "3", "--layers", "1", "--heads", "2", "--ffn", "32"), seq_len=32),
)


@dataclass(frozen=True)
class Travel:
    """One thing carried to the GPU machine, in rank order, within the 64 MiB: a bundled model
    folder (compressed) or a domain's training tokens (a byte cap on the compressed shards)."""

    what: str  # "model" | "tokens"
    name: str  # model folder name or domain
    cap_mib: float = 0.0  # tokens: at most this much compressed


#: what travels by default: the bundled text AS-ARM (speed table, comparisons, a continued start),
#: every text training token that fits beside it, then the text PTP head (assd-ptp in the speed table)
TEXT_TRAVEL: tuple[Travel, ...] = (
    Travel("model", "text-asarm"),
    Travel("tokens", "text", cap_mib=60.0),
    Travel("model", "text-ptp1"),
)

def ptp_travel(domain: str = "text") -> tuple[Travel, ...]:
    """What travels with `--plan ptp`: the teacher, the head it continues, then the tokens that fit."""
    return (Travel("model", f"{domain}-asarm"), Travel("model", ptp_head_name(domain)),
            Travel("tokens", domain, cap_mib=60.0))


#: what travels with `--plan full`, best first: the speed table's AS-ARMs and the text data first
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


@dataclass(kw_only=True)
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


#: the device command: `run` with timeout_s COMMAND_S; the campaign's own clock is CAMPAIGN_S, the
#: rest is python's start and the last archive. Device time outside the command (docs/TRAINING.md):
#: the machine's start and the transfers, about START_RESERVE_S + TRANSFER_S of the loan's 900 s.
COMMAND_S, CAMPAIGN_S, START_RESERVE_S, TRANSFER_S = 570.0, 560.0, 150.0, 60.0
#: the text plan's size probe (one short `engine train` of the largest size, --batch auto) and each
#: training job's fixed costs inside its seconds (start, data to the device, the final save)
PROBE_S, JOB_OVERHEAD_S = 30.0, 20.0
#: seconds between the checkpoints a training job leaves in the output folder (a kill keeps the last)
CHECKPOINT_EVERY_S = 120.0


def gpu_budget(total_s: float = CAMPAIGN_S, plan: str = "text") -> Budget:
    """The text plan: the speed table on the bundled text AS-ARM (60 s, text first: bench assd 40 s,
    bench calls 20 s), no evaluations on the GPU (they run on the CPU after the loan), 10 s to
    pack what comes back; training gets the rest. Budgets equal the sum of their steps' caps. The
    full plan (`--plan full`, every domain): the older 100 s table and 45 s of evaluations."""
    if plan == "ptp":  # the head's speed is a CPU question: no GPU speed table, every second trains
        return Budget(total_s=total_s, speed_s=0.0, eval_s=0.0, reserve_s=10.0,
                      step_cap_s={"bench-assd": 0.0, "bench-calls": 0.0, "eval": 0.0, "fills": 0.0})
    if plan == "text":
        return Budget(total_s=total_s, speed_s=60.0, eval_s=0.0, reserve_s=10.0,
                      step_cap_s={"bench-assd": 40.0, "bench-calls": 20.0, "eval": 0.0, "fills": 0.0})
    return Budget(total_s=total_s, speed_s=100.0, eval_s=45.0, reserve_s=20.0,
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
    return Budget(total_s=total_s, speed_s=0.35 * total_s, eval_s=0.3 * total_s, reserve_s=0.02 * total_s,
                  step_cap_s={"bench-assd": 0.2 * total_s, "bench-calls": 0.15 * total_s, "eval": 0.15 * total_s,
                              "fills": 0.1 * total_s})


def text_timeline(budget: Budget, unpack_s: float, job_start_s: float, save_s: float, pack_s: float,
                  probe_s: float = PROBE_S) -> dict:
    """The text plan's predicted seconds, from costs measured on the CPU at the loan's real shapes
    (`campaign rehearse`): the device time outside the command (machine start, transfers), then the
    command's parts in order. Gradient steps are what the job's seconds leave after its start, its
    checkpoints (one every CHECKPOINT_EVERY_S and the last) and the size probe."""
    train_s = budget.train_s() - unpack_s
    job_s = train_s - probe_s
    n_saves = int(max(0.0, job_s - job_start_s) // CHECKPOINT_EVERY_S) + 1
    gradient_s = job_s - job_start_s - n_saves * save_s
    parts = {"unpack_s": unpack_s, "speed_table_s": budget.speed_s, "size_probe_s": probe_s,
             "job_start_s": job_start_s, "gradient_steps_s": gradient_s, "checkpoints_s": n_saves * save_s,
             "evaluation_s": budget.eval_s, "packing_s": budget.reserve_s}
    command = sum(parts.values()) + (COMMAND_S - CAMPAIGN_S)
    return {"start_reserve_s": START_RESERVE_S, "transfer_s": TRANSFER_S, **{k: round(v, 1) for k, v in parts.items()},
            "python_and_last_archive_s": COMMAND_S - CAMPAIGN_S, "checkpoint_files_s": round(n_saves * pack_s, 1),
            "command_s": round(command, 1), "command_limit_s": COMMAND_S,
            "device_total_s": round(command + START_RESERVE_S + TRANSFER_S, 1), "device_budget_s": 900.0}
