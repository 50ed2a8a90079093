"""`python -m lab.campaign run|pack|unpack-returned`: the lent-GPU campaign in one command.

Why: a loan is rare and short (15 minutes of device time, one command of at most 10, 64 MiB each
way, no network, no gradio/sqlalchemy/plotly there), so the whole loan is one prepared command:
  1. the speed table on the bundled weights first (`bench assd`, every exact sampler, three domains,
     k = 5; `bench calls` for the bundled AS-ARM and a random XLNet-base sized model);
  2. the plan's training jobs (lab/campaign_plan.py), one at a time with the whole GPU,
     each for its share of the minutes left, `--init` from the bundled weights where the
     architecture is unchanged;
  3. `engine eval` and `bench fills` of each new model beside the bundled one, while minutes remain;
  4. at most 8 files of at most 16 MiB (64 MiB in all) in the output folder, written as soon as
     each result exists: campaign.jsonl (one line a step), logs.tar.xz (every step's log, rewritten
     after each step), one xz tar per model (split in parts where larger than 16 MiB), ranked.
Every step runs as its own `python -m engine ...` process under a time limit (its guard): a
failure or a timeout is logged and the next step runs. Nothing here imports the app or the store;
tests/lab/test_campaign.py runs the CPU dry run with those imports made to fail.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import replace
from pathlib import Path

from . import campaign_pack as pack
from .campaign_plan import (
    CAMPAIGN_S,
    CHECKPOINT_EVERY_S,
    COMMAND_S,
    DRY_JOBS,
    DRY_SIZES,
    GPU_JOBS,
    JOB_OVERHEAD_S,
    PROBE_S,
    PTP_ONEPASS,
    RETURN_FILE_MIB,
    RETURN_FILES,
    RETURN_TOTAL_MIB,
    START_RESERVE_S,
    TEXT_JOBS,
    TEXT_SIZES,
    TEXT_TRAVEL,
    TRANSFER_S,
    TRAVEL,
    TREE_LIMIT_MIB,
    Budget,
    Job,
    choose_text_size,
    dry_budget,
    gpu_budget,
    ptp_curve_args,
    ptp_jobs,
    ptp_travel,
    share_of_pool,
    text_timeline,
    with_text_size,
)

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
#: versions + unpacking the text plan's travel folder on the H200 machine, 2026-11-27 (campaign.jsonl)
FIRST_LOAN_UNPACK_S = 4.9
VERSIONS = ("torch", "transformers", "accelerate", "numpy", "scipy", "safetensors", "tokenizers")
DOMAINS = ("text", "code", "protein")


def versions() -> dict:
    """The packages the campaign finds (the GPU machine's may differ from ours) and the device."""
    from importlib import metadata

    out: dict = {"python": sys.version.split()[0]}
    for name in VERSIONS:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    try:
        import torch

        out["cuda"] = torch.version.cuda
        out["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception as e:  # noqa: BLE001  (a broken torch is a finding, not a crash)
        out["torch_error"] = repr(e)
    return out


class Campaign:
    """One campaign: its output folder, work folder, clock and the record of every step."""

    def __init__(self, a: argparse.Namespace):
        self.a = a
        self.out = Path(a.out)
        self.work = Path(a.work)
        self.models_dir = Path(a.models_dir)
        self.data_dir = Path(a.data_dir)
        self.budget: Budget = dry_budget(a.seconds) if a.dry_run else gpu_budget(a.seconds, a.plan)
        self.t0 = time.monotonic()
        self.fail = set(a.fail or [])
        self.returned: list[Path] = []
        self.trained: dict[str, Path] = {}
        self.teachers: dict[str, Path] = {}  # a PTP job's teacher folder (config.json keeps only its name)
        for d in (self.out, self.work / "logs", self.work / "models"):
            d.mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "INFILL_DEVICE": a.device, "INFILL_DATA_DIR": str(self.data_dir.resolve()),
                    "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false",
                    "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p)}
        if a.dry_run:  # tiny models on a shared CPU: one thread each wastes least
            self.env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")

    # -- bookkeeping ---------------------------------------------------------------------------
    def left(self) -> float:
        """Seconds of the campaign left."""
        return self.budget.total_s - (time.monotonic() - self.t0)

    def record(self, step: str, **fields) -> dict:
        """One line of campaign.jsonl, written (and the logs archive refreshed) at once."""
        row = {"step": step, "t": round(time.monotonic() - self.t0, 1), **fields}
        with open(self.out / "campaign.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        self.say(f"[{row['t']:6.1f}s] {step}: " + ", ".join(f"{k}={v}" for k, v in fields.items()
                                                           if k in ("ok", "error", "seconds", "skipped", "files")))
        self.archive_logs()
        return row

    def say(self, line: str) -> None:
        """A line on stdout (the device call's output tail) and in the campaign's own log."""
        print(line, flush=True)
        with open(self.work / "logs" / "campaign.log", "a") as f:
            f.write(line + "\n")

    def archive_logs(self) -> None:
        """logs.tar.xz: every step's log and every JSON so far (rewritten after each step)."""
        tmp = self.out / "logs.tar.xz.tmp"
        with tarfile.open(tmp, "w:xz", preset=1) as tar:
            tar.add(self.work / "logs", arcname="logs")
            for st in sorted(self.work.glob("models/*/train_state.json")):
                tar.add(st, arcname=f"train_state/{st.parent.name}.json")
        tmp.replace(self.out / "logs.tar.xz")

    # -- the guard -----------------------------------------------------------------------------
    def guard(self, step: str, cmd: list[str], cap_s: float, want_json: bool = False, given_s: float | None = None,
              after=None, tick=None) -> dict:
        """Run one step as its own process within min(cap_s, time left): a failure, a timeout or
        unreadable output is recorded and the campaign goes on. `given_s`: the seconds the step was
        given (a training job); its record adds used_s and passed_on_s (what it left unused).
        `after`: a callable whose fields (read once the process ended) join the record. `tick`: called
        about every second while the process runs (a training job's checkpoints go out with it)."""
        limit = min(cap_s, self.left() - self.budget.reserve_s)
        if limit < 3:
            return self.record(step, ok=False, skipped=f"no time left ({self.left():.0f}s)",
                               **({} if given_s is None else _passing(given_s, 0.0)))
        if step in self.fail:  # --fail STEP: the guards' own test
            cmd = [sys.executable, "-c", f"raise SystemExit('injected failure of {step}')"]
        log = self.work / "logs" / f"{step}.log"
        t = time.monotonic()

        def done(**fields) -> dict:
            secs = round(time.monotonic() - t, 1)
            more = {} if given_s is None else _passing(given_s, secs)
            return self.record(step, **fields, seconds=secs, **more, **(after() if after else {}))

        try:
            with open(log, "w") as lf:
                lf.write("$ " + " ".join(cmd) + "\n")
                lf.flush()
                stdout, code = _run_polled(cmd, self.env, lf, limit, tick)
            with open(log, "a") as lf:
                lf.write(stdout)
            if code is None:
                return done(ok=False, error=f"timeout {limit:.0f}s")
            if code != 0:
                return done(ok=False, error=f"exit {code}: {_tail(log)}")
            result = _json_out(stdout) if want_json else None
            return done(ok=True, result=result)
        except (OSError, ValueError, IndexError) as e:  # no output, not JSON
            return done(ok=False, error=repr(e)[:300])

    def engine(self, *args: str) -> list[str]:
        """A `python -m engine ...` command line (each step its own process)."""
        return [sys.executable, "-m", "engine", *args]

    # -- the steps -----------------------------------------------------------------------------
    def model(self, name: str) -> Path | None:
        """A model folder: this campaign's new one if trained, else the bundled one, else None."""
        for p in (self.work / "models" / name, self.models_dir / name):
            if (p / "config.json").is_file():
                return p
        return None

    def bundled(self, name: str) -> Path | None:
        """The bundled (carried) folder of a model, or None where it did not travel."""
        p = self.models_dir / name
        return p if (p / "config.json").is_file() else None

    def speed_table(self, tag: str = "") -> None:
        """bench assd for each domain (every exact sampler; assd-ptp where a PTP head is there),
        then bench calls for the text AS-ARM and a random XLNet-base sized model."""
        from .bench_samplers import ASSD_BENCH  # the engine's catalogue, read only when the table runs

        caps = self.budget.step_cap_s
        dry = self.a.dry_run
        for d in self.a.domains:
            m = self.model(f"{d}-asarm") if tag else self.bundled(f"{d}-asarm")
            if m is None:
                self.record(f"bench-assd-{d}{tag}", ok=False, skipped=f"no {d}-asarm here")
                continue
            ptp = next((p for p in (self.bundled(f"{d}-ptp1"), self.bundled(f"{d}-ptp")) if p), None)
            if tag:  # new weights: their new head, if one was trained
                ptp = next((self.work / "models" / n for n in (f"{d}-ptp1", f"{d}-ptp")
                            if (self.work / "models" / n / "config.json").is_file()), ptp)
            samplers = ",".join(ASSD_BENCH + (["assd-ptp"] if ptp else []))
            cmd = self.engine("bench", "assd", "--model", str(m), "--domain", d, "--k", "5", "--json", "--quiet",
                              "--samplers", samplers, "--samples", "1" if dry else ("4" if self.a.plan == "text" else "6"),
                              "--length", "24" if dry else "256",
                              "--partial", str(self.work / "logs" / f"bench-assd-{d}{tag}.partial.jsonl"))
            if ptp:
                cmd += ["--draft-model", str(ptp)]
            self.guard(f"bench-assd-{d}{tag}", cmd, caps["bench-assd"], want_json=True)
        if tag:
            return
        text = self.bundled("text-asarm")
        if text:
            self.guard("bench-calls-text", self.engine("bench", "calls", "--model", str(text), "--json",
                                                       "--reps", "2" if dry else "15"), caps["bench-calls"], True)
        if self.a.plan == "text" and not dry:  # the text plan's 60 s: bench calls for the text AS-ARM only
            return
        self.guard("bench-calls-xlnet", self.engine("bench", "calls", "--xlnet-base-random", "--json",
                                                    "--context", "16" if dry else "200", "--reps", "1" if dry else "15"),
                   caps["bench-calls"], True)

    def has_data(self, domain: str) -> bool:
        """Whether a domain's training data is here (token arrays or corpus text)."""
        return (self.data_dir / "tokens" / domain / "manifest.json").is_file() or \
            (self.data_dir / "corpora" / domain / "train.jsonl").is_file()

    def job_args(self, job: Job) -> list[str] | str:
        """The `engine train` flags of a job, or why it cannot run."""
        if not self.has_data(job.domain):
            return f"no {job.domain} data carried"
        args = ["--kind", job.kind, "--domain", job.domain, "--seq-len", str(job.seq_len)]
        init = self.bundled(job.init) if job.init else None
        if job.kind == "ptp":
            teacher = self.model(job.teacher or f"{job.domain}-asarm")
            if teacher is None:
                return f"no teacher {job.teacher}"
            t_cfg, i_cfg = _config(teacher), (_config(init) if init else {})
            args += ["--teacher", str(teacher), *job.extra]
            if "--heads" not in job.extra:  # the head's attention heads follow its teacher's
                args += ["--heads", str(t_cfg["num_heads"])]
            self.teachers[job.name] = teacher
            if init and all(i_cfg.get(k) == t_cfg.get(k) for k in ("hidden_size", "vocab_size")):
                args += ["--init", str(init)]  # a warm start: the head's weights fit this teacher
                if i_cfg.get("prev_rank"):  # at the rank of its low-rank term, whatever the plan's
                    args += ["--prev-rank", str(i_cfg["prev_rank"])]  # (the last flag wins)
            return args
        if init and _size(_config(init)) == job.size:
            return args + ["--init", str(init), *job.extra]  # continued training: the same architecture
        h, layers, heads, ffn = job.size or (256, 4, 4, 768)
        return args + ["--hidden", str(h), "--layers", str(layers), "--heads", str(heads), "--ffn", str(ffn),
                       *job.extra]

    def train(self, jobs: tuple[Job, ...]) -> None:
        """Each job of the plan in order. Its share of the training seconds is fixed in advance and
        is the most it is first given; what a job leaves unused (a PTP head stopped by its flat
        curve, a job that ended early or was skipped) is handed on to the jobs after it, in
        proportion to their shares (the last job gets all of it; after it, the evaluations)."""
        train_s = min(self.budget.train_s(), self.left() - self.budget.eval_s - self.budget.reserve_s)
        self.record("train-plan", seconds=round(train_s), jobs=[(j.name, round(j.share * train_s)) for j in jobs],
                    unused="handed on to the following jobs in proportion to their shares")
        pool = 0.0  # seconds handed on, not yet given
        for i, job in enumerate(jobs):
            extra_s = share_of_pool(pool, jobs, i)
            pool -= extra_s
            secs = max(0.0, min(job.share * train_s + extra_s,
                                self.left() - self.budget.eval_s - self.budget.reserve_s))
            overhead = 4.0 if self.a.dry_run else (job.overhead_s or JOB_OVERHEAD_S)  # start-up, data, the last save
            batch = ["--batch", str(job.batch)] if job.batch else ["--batch", "auto", "--probe-seconds", "10"]
            if job.auto_size and self.has_data(job.domain):  # measure tokens/s, then pick the size
                t = time.monotonic()
                job, probed_batch = self.choose_size(job, secs)
                secs = max(0.0, secs - (time.monotonic() - t))
                if probed_batch:
                    batch = ["--batch", str(probed_batch)]
            args = self.job_args(job)
            if isinstance(args, str):
                self.record(f"train-{job.name}", ok=False, skipped=args, **_passing(secs, 0.0))
                pool += secs
                continue
            minutes = max(0.02, (secs - overhead) / 60)
            out = self.work / "models" / job.name
            save_minutes = CHECKPOINT_EVERY_S / 60 if not self.a.dry_run else max(minutes / 2, 0.5)
            cmd = self.engine("train", *args, "--out", str(out), "--minutes", f"{minutes:.3f}", "--quiet",
                              "--save-minutes", f"{save_minutes:.2f}", "--device", self.a.device, *batch,
                              "--data-chars", "20000" if self.a.dry_run else "2000000000")
            if job.kind == "ptp":  # the held-out acceptance curve, and the stop rule that reads it
                cmd += ptp_curve_args(job.share * train_s - overhead, self.a.dry_run, stop=len(jobs) > 1)
            if self.a.dry_run:
                cmd += ["--threads", "1", "--warmup", "2", "--probe-steps", "2", "--max-batch-tokens", "600",
                        "--steps", "3"]
            r = self.guard(f"train-{job.name}", cmd, secs + (30 if self.a.dry_run else 60), given_s=secs,
                           after=(lambda out=out: _curve_fields(out)) if job.kind == "ptp" else None,
                           tick=self.checkpoint_exporter(job.name, out))
            pool += r.get("passed_on_s", 0.0)
            if (out / "train_state.json").is_file():  # a job cut short still saved its last checkpoint
                self.trained[job.name] = out
                st = json.loads((out / "train_state.json").read_text())
                self.return_model(job.name, out, st, r)
        self.record("train-end", ok=True, passed_on_s=round(pool, 1), to="the evaluations")

    def choose_size(self, job: Job, secs: float) -> tuple[Job, int | None]:
        """The text plan's size: a short `engine train` of the largest size with --batch auto
        measures tokens/s on this GPU (forward + backward, synchronised), and choose_text_size picks
        the largest size that sees about 20 tokens a parameter in the job's seconds; the run then
        trains at the batch the probe chose. Where the probe fails, the bundled size (continued)."""
        sizes = DRY_SIZES if self.a.dry_run else TEXT_SIZES
        h, layers, heads, ffn = sizes[-1]
        out = self.work / "probe" / job.name
        dry = self.a.dry_run
        cmd = self.engine("train", "--kind", job.kind, "--domain", job.domain, "--seq-len", str(job.seq_len),
                          "--hidden", str(h), "--layers", str(layers), "--heads", str(heads), "--ffn", str(ffn),
                          "--out", str(out), "--steps", "3" if dry else "8", "--minutes", "2", "--quiet",
                          "--save-minutes", "99", "--device", self.a.device, "--batch", "auto",
                          "--probe-seconds", "2" if dry else "12", "--data-chars", "20000" if dry else "2000000000",
                          *(["--threads", "1", "--probe-steps", "2", "--max-batch-tokens", "600"] if dry else []))
        self.guard(f"probe-{job.name}", cmd, PROBE_S * (3 if dry else 1))
        probe = _probe_fields(out)
        if not probe:
            self.record(f"size-{job.name}", ok=False, size=list(sizes[0]), why="the probe failed: bundled size")
            return replace(job, size=sizes[0]), None
        train_s = max(0.0, secs - PROBE_S - JOB_OVERHEAD_S)
        # the probe times forward + backward; the optimizer step and the loop cost about a tenth more
        choice = choose_text_size(0.9 * probe["tokens_per_s"], sizes[-1], train_s, job.seq_len, sizes)
        self.record(f"size-{job.name}", ok=True, probe=probe, train_s=round(train_s), **choice)
        return replace(job, size=choice["size"]), probe["batch"]

    def checkpoint_exporter(self, name: str, folder: Path):
        """A tick that sends each new checkpoint of a running job to the output folder (train_state.json
        is written last, so a new one means a complete folder): a kill keeps the last one."""
        seen: dict[str, float] = {}

        def tick() -> None:
            st = folder / "train_state.json"
            if not st.is_file() or seen.get("mtime") == st.stat().st_mtime:
                return
            seen["mtime"] = st.stat().st_mtime
            self.return_model(name, folder, json.loads(st.read_text()), {"ok": None}, checkpoint=True)

        return tick

    def return_model(self, name: str, folder: Path, state: dict, step: dict, checkpoint: bool = False) -> None:
        """Pack a new model into the output folder now, if it fits what may come back (its earlier
        checkpoint there is replaced)."""
        blob = pack.tar_xz(folder, preset=1)
        parts = -(-len(blob) // int(RETURN_FILE_MIB * MIB))
        old = [p for p in self.out.iterdir() if p.is_file() and p.name.startswith(f"{name}.tar.xz")]
        others = [p for p in self.out.iterdir() if p.is_file() and p not in old]
        used = sum(p.stat().st_size for p in others)
        n_files = len(others)
        reserve_files = 0 if (self.out / "logs.tar.xz").exists() else 1
        what = f"checkpoint-{name}" if checkpoint else f"return-{name}"
        if n_files + reserve_files + parts > RETURN_FILES or used + len(blob) + MIB > RETURN_TOTAL_MIB * MIB:
            self.record(what, ok=False, skipped=f"{len(blob) / MIB:.1f} MiB in {parts} files does "
                        f"not fit ({n_files} files, {used / MIB:.1f} MiB already)", train_state=state)
            return
        for p in old:
            p.unlink()
        files = pack.write_parts(blob, self.out, f"{name}.tar.xz")
        self.returned = [p for p in self.returned if p not in old] + files
        self.record(what, ok=True, files=[f.name for f in files], mib=round(len(blob) / MIB, 2),
                    train_state=state, train_ok=step.get("ok"))

    def evaluate(self) -> None:
        """engine eval and bench fills of each new model beside its bundled one (AS-ARMs for fills)."""
        caps, dry = self.budget.step_cap_s, self.a.dry_run
        if self.budget.eval_s <= 0:  # the text plan: every second trains; eval and fills run on the CPU after
            self.record("eval", ok=True, skipped="the plan evaluates on the CPU after the loan (docs/TRAINING.md)")
            return
        for name, folder in self.trained.items():
            old = self.bundled(name)
            if _config(folder).get("model_type") == "ptp":  # a head: its acceptance against its own teacher
                windows = "4" if dry else "64"
                self.guard(f"eval-{name}", self.engine("train", "ptp-eval", str(folder), "--teacher",
                                                       str(self.teachers[name]), "--windows", windows),
                           caps["eval"], want_json=True)
                old_teacher = self.bundled(_config(old)["teacher"]) if old else None
                if old and old_teacher:
                    self.guard(f"eval-{name}-bundled", self.engine("train", "ptp-eval", str(old), "--teacher",
                                                                   str(old_teacher), "--windows", windows),
                               caps["eval"], want_json=True)
                continue
            cmd = self.engine("eval", "--model", str(folder), "--json", "--quiet", "--samples", "2" if dry else "8",
                              "--humaneval-limit", "5" if dry else "100")
            if old:
                cmd += ["--model", str(old)]
            self.guard(f"eval-{name}", cmd, caps["eval"], want_json=True)
            if name.endswith("-asarm"):
                d = name.split("-")[0]
                for tag, m in (("new", folder), ("bundled", old)):
                    if m is not None:
                        self.guard(f"fills-{name}-{tag}", self.engine(
                            "bench", "fills", "--domains", d, f"--{d}-model", str(m), "--json", "--seeds",
                            "1" if dry else "3", "--temperatures", "1", "--modes", "before",
                            *(["--limit", "2"] if dry else [])), caps["fills"], want_json=True)

    def check_out(self) -> dict:
        """What will come back: at most 8 files, each <= 16 MiB, 64 MiB in all."""
        files = sorted(p for p in self.out.iterdir() if p.is_file())
        sizes = {p.name: p.stat().st_size for p in files}
        ok = (len(files) <= RETURN_FILES and all(s <= RETURN_FILE_MIB * MIB for s in sizes.values())
              and sum(sizes.values()) <= RETURN_TOTAL_MIB * MIB)
        return {"ok": ok, "files": sizes, "total_mib": round(sum(sizes.values()) / MIB, 2)}

    def run(self) -> int:
        """Every step in order: versions, unpack, speed table, training, evaluations, the table
        again on new weights if time remains, and the check of what comes back."""
        v = versions()
        print("versions: " + ", ".join(f"{k} {val}" for k, val in v.items()), flush=True)
        self.record("versions", ok=True, result=v, device=self.a.device, budget_s=self.budget.total_s)
        travel = Path(self.a.travel)
        if (travel / "travel.json").is_file():
            done = pack.unpack_travel(travel, self.models_dir, self.data_dir)
            self.record("unpack", ok=True, result=done)
        if self.budget.speed_s > 0:
            self.speed_table()
        jobs = {"text": TEXT_JOBS, "ptp": ptp_jobs(self.a.ptp_domain)}.get(self.a.plan) \
            or with_text_size(GPU_JOBS, self.a.text_size)
        self.train(DRY_JOBS if self.a.dry_run else jobs)
        self.evaluate()
        if self.budget.speed_s > 0 and self.left() > self.budget.step_cap_s["bench-assd"] + self.budget.reserve_s \
                and self.trained:
            self.speed_table(tag="-new")  # the speed table again, on the new weights
        self.record("done", ok=True, result=self.check_out(), left_s=round(self.left(), 1))
        self.archive_logs()
        return 0


def _run_polled(cmd: list[str], env: dict, log, limit: float, tick=None) -> tuple[str, int | None]:
    """Run cmd (stderr to the open log, stdout kept) until it ends or `limit` seconds pass (then it
    is killed: exit code None), calling tick() about every second meanwhile."""
    import tempfile

    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=log, text=True)
        end = time.monotonic() + limit
        while proc.poll() is None and time.monotonic() < end:
            try:
                proc.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                pass
            if tick is not None and proc.poll() is None:
                tick()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            code = None
        else:
            code = proc.returncode
        out.seek(0)
        return out.read(), code


def _passing(given_s: float, used_s: float) -> dict:
    """A training job's seconds: given (its share plus what earlier jobs handed on), used, handed on."""
    return {"given_s": round(given_s, 1), "used_s": round(used_s, 1), "passed_on_s": round(max(0.0, given_s - used_s), 1)}


def _probe_fields(folder: Path) -> dict | None:
    """The size probe's measurement: the batch it chose and that batch's tokens/s (None if it failed)."""
    f = folder / "train_state.json"
    probe = (json.loads(f.read_text()).get("batch_probe") or {}) if f.is_file() else {}
    row = next((r for r in probe.get("rows", []) if r["batch"] == probe.get("chosen")), None)
    return None if row is None else {"batch": row["batch"], "tokens_per_s": round(row["tokens_per_s"]),
                                     "rows": probe["rows"], "reason": probe.get("reason")}


def _curve_fields(folder: Path) -> dict:
    """A PTP job's held-out acceptance curve (tokens, acceptance) and why it stopped early, if it did."""
    f = folder / "train_state.json"
    st = json.loads(f.read_text()) if f.is_file() else {}
    points = (st.get("acceptance_curve") or {}).get("points", [])
    return {"curve": [[p["tokens"], p["acceptance"]] for p in points], "stopped_flat": st.get("stopped_flat")}


def _json_out(stdout: str):
    """A step's JSON: the whole output, else its last line (progress lines before it)."""
    try:
        return json.loads(stdout)
    except ValueError:
        return json.loads(stdout.strip().splitlines()[-1])


def _tail(log: Path, n: int = 400) -> str:
    text = log.read_text(errors="replace").strip()
    return text[-n:].replace("\n", " | ")


def _config(folder: Path) -> dict:
    return json.loads((folder / "config.json").read_text())


def _size(cfg: dict) -> tuple[int, int, int, int]:
    return (cfg.get("hidden_size"), cfg.get("num_layers"), cfg.get("num_heads"), cfg.get("intermediate_size"))


def rehearse(travel: Path, work: Path, threads: int = 2) -> dict:
    """The text plan's timeline from costs measured here at the loan's real shapes (the largest
    size, 256-token windows, the real travel folder): unpacking it, starting a training job and
    running one step of it, saving a checkpoint, packing it for the output folder. This CPU is slower
    than the GPU machine's 16 cores, so each cost is an upper bound there."""
    import shutil
    import tempfile

    work.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=work))
    try:
        t = time.monotonic()
        pack.unpack_travel(travel, tmp / "models", tmp / "data")
        unpack_s = time.monotonic() - t
        h, layers, heads, ffn = TEXT_SIZES[-1]
        out = tmp / "job"
        env = {**os.environ, "INFILL_DATA_DIR": str(tmp / "data"), "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "engine", "train", "--kind", "asarm", "--domain", "text", "--seq-len", "256",
               "--hidden", str(h), "--layers", str(layers), "--heads", str(heads), "--ffn", str(ffn), "--out", str(out),
               "--steps", "1", "--batch", "8", "--minutes", "5", "--save-minutes", "99", "--quiet",
               "--threads", str(threads), "--device", "cpu", "--data-chars", "2000000000"]
        t = time.monotonic()
        subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
        job_s = time.monotonic() - t  # start, data, one step, one save
        t = time.monotonic()
        blob = pack.tar_xz(out, preset=1)
        pack_s = time.monotonic() - t
        save_s = _save_seconds(out, threads)
        # seconds scaled to the GPU machine's host by the one cost both machines measured: unpacking
        # this travel folder (the first loan's campaign.jsonl: FIRST_LOAN_UNPACK_S there)
        scale = max(1.0, unpack_s / FIRST_LOAN_UNPACK_S)
        here = {"unpack_s": unpack_s, "job_start_s": max(0.0, job_s - save_s), "save_s": save_s, "pack_s": pack_s}
        timeline = text_timeline(gpu_budget(), *(v / scale for v in here.values()))
        return {"measured_here_s": {k: round(v, 1) for k, v in here.items()}, "scale_to_gpu_host": round(scale, 2),
                "size": [h, layers, heads, ffn], "checkpoint_mib": round(len(blob) / MIB, 2), **timeline}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ptp_head_command(teacher: Path, out: Path, minutes: float, threads: int) -> list[str]:
    """`engine train --kind ptp` for a one-pass head of the bundled heads' settings (PTP_ONEPASS),
    its attention heads those of the teacher, its held-out acceptance curve every tenth of the run."""
    heads = _config(teacher)["num_heads"]
    return [sys.executable, "-m", "engine", "train", "--kind", "ptp", "--domain", "text", "--teacher", str(teacher),
            "--out", str(out), *PTP_ONEPASS, "--heads", str(heads), "--seq-len", "256", "--batch", "4",
            "--threads", str(threads), "--minutes", f"{minutes:g}", "--save-minutes", "10",
            "--curve-every", f"{max(30.0, minutes * 6):.0f}s", "--quiet"]


def _save_seconds(folder: Path, threads: int) -> float:
    """Seconds to save a checkpoint of the model in `folder` as a training job does (save_pretrained,
    bf16 compaction, tokenizer), timed in this process."""
    import torch
    from transformers import AutoModel

    from engine.inputs.tokenization import Codec
    from engine.models import register_all

    from .train_checkpoint import compact

    register_all()  # the Auto classes learn the project's model types
    torch.set_num_threads(threads)
    model, codec = AutoModel.from_pretrained(str(folder), dtype=torch.float32), Codec.load(folder)
    dest = folder.parent / "save"
    t = time.monotonic()
    model.save_pretrained(dest)
    compact(dest)
    codec.hf.save_pretrained(dest)
    return time.monotonic() - t


def cli(argv: list[str] | None = None) -> int:
    """`python -m lab.campaign run|pack|unpack-returned`."""
    ap = argparse.ArgumentParser(prog="python -m lab.campaign")
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="the campaign (on the GPU machine; --dry-run: seconds, tiny models, the CPU)")
    r.add_argument("--out", default=os.environ.get("OUT", "runs/campaign-out"))
    r.add_argument("--work", default="runs/campaign-work", help="logs and full checkpoints (not brought back)")
    r.add_argument("--seconds", type=float, default=None,
                   help=f"the whole campaign (default {CAMPAIGN_S:.0f}; dry run 120)")
    r.add_argument("--device", default=None, help="default cuda (dry run: cpu)")
    r.add_argument("--models-dir", default=str(ROOT / "assets" / "models"))
    r.add_argument("--data-dir", default=os.environ.get("INFILL_DATA_DIR", "data"))
    r.add_argument("--travel", default="data/travel", help="the packed travel folder (unpacked first if there)")
    r.add_argument("--plan", choices=["text", "ptp", "full"], default="text",
                   help="text: the speed table, then ONE text AS-ARM for every training second (sized on the "
                        "GPU); ptp: a PTP head alone (--ptp-domain), continued against its bundled AS-ARM, every "
                        "second; full: every domain, heads and hybrids with the evaluations (the older plan)")
    r.add_argument("--domains", default=None, help="the speed table's domains (default: text; full plan: all)")
    r.add_argument("--ptp-domain", default="text", choices=DOMAINS, help="--plan ptp: whose head trains")
    r.add_argument("--text-size", choices=["chosen", "bundled"], default="chosen",
                   help="the text AS-ARM: the plan's new size (trained from scratch) or the bundled one (continued)")
    r.add_argument("--dry-run", action="store_true")
    r.add_argument("--fail", action="append", metavar="STEP", help="make this step fail (tests the guards)")
    p = sub.add_parser("pack", help="write the travel folder (here, before the loan)")
    p.add_argument("--out", default="data/travel")
    p.add_argument("--plan", choices=["text", "ptp", "full"], default="text",
                   help="text and ptp: the bundled text AS-ARM, every text training token that fits and the "
                        "text PTP head; full: TRAVEL")
    p.add_argument("--ptp-domain", default="text", choices=DOMAINS, help="--plan ptp: whose head, teacher and tokens")
    p.add_argument("--models-dir", default=str(ROOT / "assets" / "models"))
    p.add_argument("--data-dir", default=os.environ.get("INFILL_DATA_DIR", "data"))
    p.add_argument("--limit-mib", type=float, default=TREE_LIMIT_MIB, help="what may travel (tree + travel + 1 MiB)")
    u = sub.add_parser("unpack-returned", help="unpack the model files that came back into a folder")
    u.add_argument("files", nargs="+")
    u.add_argument("--dest", default="runs/campaign-returned")
    c = sub.add_parser("check", help="whether the tree and the travel folder go as they stand (sparse checkout set, "
                                     "within 63 MiB); one line, exit 2 if not")
    c.add_argument("--travel", default="data/travel")
    lc = sub.add_parser("loan-command", help="the device call to make now: its command, what it carries, its limit")
    lc.add_argument("--plan", choices=["text", "ptp"], default="text")
    lc.add_argument("--ptp-domain", default="text", choices=DOMAINS)
    hd = sub.add_parser("ptp-head", help="after a loan, on the CPU: a one-pass PTP head for a returned text AS-ARM")
    hd.add_argument("--teacher", default="runs/campaign-returned/text-asarm")
    hd.add_argument("--out", default="runs/ptp-head/text-ptp1")
    hd.add_argument("--minutes", type=float, default=40.0)
    hd.add_argument("--threads", type=int, default=2)
    h = sub.add_parser("rehearse", help="the text plan's predicted timeline from costs measured here (one JSON line)")
    h.add_argument("--travel", default="data/travel")
    h.add_argument("--work", default="runs/rehearse")
    h.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    if a.cmd == "loan-command":
        plan_flag = f" --plan {a.plan}" if a.plan != "text" else ""
        plan_flag += f" --ptp-domain {a.ptp_domain}" if a.plan == "ptp" and a.ptp_domain != "text" else ""
        print(json.dumps({"kind": "nvidia-h100-x1 (or nvidia-h200)", "timeout_s": int(COMMAND_S),
                          "carry": ["data/travel"], "command": 'python3 -m lab.campaign run --out "$OUT"' + plan_flag}))
        print(f"after it: make gpu-loan-back FILES=<files_at>  (the campaign's own clock is {CAMPAIGN_S:.0f} s; "
              f"reserve about {START_RESERVE_S + TRANSFER_S:.0f} s of the 900 s loan for the start and transfers)")
        return 0
    if a.cmd == "ptp-head":
        cmd = ptp_head_command(Path(a.teacher), Path(a.out), a.minutes, a.threads)
        print("$ " + " ".join(cmd), flush=True)
        return subprocess.run(cmd, cwd=ROOT).returncode
    if a.cmd == "rehearse":
        if not (Path(a.travel) / "travel.json").is_file():
            print(f"rehearse: no packed travel folder at {a.travel} (run `make gpu-campaign-pack` first)")
            return 2
        print(json.dumps(rehearse(Path(a.travel), Path(a.work), a.threads)))
        return 0
    if a.cmd == "check":
        why = pack.check_travel(ROOT, Path(a.travel))
        print(f"check refused: {why}" if why else "check: the tree and the travel folder go as they stand")
        return 2 if why else 0
    if a.cmd == "pack":
        plan = {"full": TRAVEL, "ptp": ptp_travel(a.ptp_domain)}.get(a.plan, TEXT_TRAVEL)
        m = pack.pack_travel(ROOT, Path(a.models_dir), Path(a.data_dir), Path(a.out), plan, limit_mib=a.limit_mib)
        for it in m["items"]:
            print(f"{it['what']:<7} {it['name']:<15} {it['bytes'] / MIB:7.2f} MiB  " +
                  (f"skipped: {it['skipped']}" if "skipped" in it else
                   json.dumps({k: v for k, v in it.items() if k in ("tokens", "train_chars", "shards", "form")})))
        total = (m["tree_bytes"] + m["travel_bytes"]) / MIB
        print(f"tree {m['tree_bytes'] / MIB:.2f} MiB + travel {m['travel_bytes'] / MIB:.2f} MiB = {total:.2f} MiB "
              f"(limit {m['limit_mib'] - 1:.0f} MiB); carry {a.out}")
        if total > m["limit_mib"] - 1:
            print(f"pack refused: tree + travel {total:.2f} MiB exceeds {m['limit_mib'] - 1:.0f} MiB")
            return 2
        return 0
    if a.cmd == "unpack-returned":
        for f in a.files:
            p = Path(f)
            if p.suffix.lstrip(".").isdigit() and not p.name.endswith(".0"):
                continue  # later parts are joined with the first
            print(pack.extract_tar_xz(pack.join_parts(p), Path(a.dest)))
        return 0
    a.seconds = a.seconds or (120.0 if a.dry_run else CAMPAIGN_S)
    a.device = a.device or ("cpu" if a.dry_run else "cuda")
    a.domains = [d for d in (a.domains or (",".join(DOMAINS) if a.plan == "full" else "text")).split(",") if d]
    return Campaign(a).run()


if __name__ == "__main__":
    raise SystemExit(cli())
