"""`python -m engine train`: time-budget schedule, --resume, precision settings (CPU, tiny corpus)."""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors.torch import load_file

from lab import train
from tests.support.tiny import write_protein_corpus

TINY = ["--kind", "asarm", "--domain", "protein", "--hidden", "16", "--layers", "2", "--heads", "2", "--ffn", "32",
        "--seq-len", "16", "--batch", "2", "--threads", "1", "--save-minutes", "100"]


@pytest.fixture
def corpus(tmp_path, monkeypatch):
    write_protein_corpus(tmp_path / "data")
    monkeypatch.setenv("INFILL_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("INFILL_DEVICE", "cpu")
    return tmp_path


def state(folder) -> dict:
    return json.loads((folder / "train_state.json").read_text())


def test_a_minutes_run_without_steps_ends_at_the_lr_floor(corpus):
    """The cosine's horizon comes from the measured step rate: the run ends on the schedule's floor."""
    out = corpus / "timed"
    assert train.cli(TINY + ["--out", str(out), "--minutes", "0.25", "--lr", "1e-3", "--min-lr", "0.1",
                             "--warmup", "10", "--probe-steps", "5"]) == 0
    st = state(out)
    assert st["horizon_from"] == "time budget" and st["steps"] > 5
    assert st["horizon"] is not None and st["steps"] >= 0.9 * st["horizon"]
    assert 1e-4 <= st["lr_final"] < 1e-4 + 0.05 * (1e-3 - 1e-4), st  # floor = 0.1 x lr, reached (nearly)
    assert st["minutes"] < 0.25 + 0.2  # the budget (plus the final save) bounds the run


def test_steps_given_is_the_horizon():
    s = train.Schedule(warmup=200, floor=0.0, horizon=1000)
    s.update(500, 500, 1.0, 10_000.0)  # a measured rate never moves a --steps horizon
    assert s.horizon == 1000 and s.warm == 100 and s.done(1000) and not s.done(999)
    cos = lambda x: 0.5 * (1 + math.cos(math.pi * x))  # noqa: E731
    assert s.factor(49) == pytest.approx(0.5 * cos(0.049)) and s.factor(99) == pytest.approx(cos(0.099))
    assert s.factor(999) < 1e-5
    t = train.Schedule(warmup=200, floor=0.0, horizon=None, probe=20)
    assert not t.done(10**9) and t.factor(10) < 0.1  # before the estimate: warm-up only
    t.update(20, 17, 1.7, 100.0)  # 10 steps/s, 100 s left -> 970 more steps
    assert t.horizon == 20 + 970 and t.warm == 99


def test_resume_continues_exactly(corpus, monkeypatch):
    """Cut at step 4 of 8, resumed: the same weights and optimizer state as one uninterrupted run."""
    full, cut = corpus / "full", corpus / "cut"
    args = TINY + ["--steps", "8", "--minutes", "5", "--warmup", "3", "--probe-steps", "2", "--save-optimizer"]
    assert train.cli(args + ["--out", str(full)]) == 0
    with monkeypatch.context() as m:  # an interruption (time budget, preemption) after step 4
        m.setattr(train.Schedule, "done", lambda self, step: step >= 4)
        assert train.cli(args + ["--out", str(cut)]) == 0
    assert state(cut)["steps"] == 4 and (cut / "trainer.pt").is_file()
    assert train.cli(["--resume", str(cut), "--minutes", "5", "--threads", "1", "--save-optimizer"]) == 0
    st = state(cut)
    assert (st["steps"], st["horizon"], st["resumed_from_step"], st["kind"]) == (8, 8, 4, "asarm")
    a = torch.load(full / "trainer.pt", weights_only=False)
    b = torch.load(cut / "trainer.pt", weights_only=False)
    for k in a["model"]:
        assert torch.equal(a["model"][k], b["model"][k]), k
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys() and all(torch.equal(sa[i]["exp_avg"], sb[i]["exp_avg"]) for i in sa)
    assert all(float(sb[i]["step"]) == 8 for i in sb)
    assert load_file(str(full / "model.safetensors")).keys() == load_file(str(cut / "model.safetensors")).keys()


def test_resume_without_trainer_state_and_a_new_horizon(corpus):
    out = corpus / "plain"
    assert train.cli(TINY + ["--out", str(out), "--steps", "3", "--minutes", "5"]) == 0
    assert not (out / "trainer.pt").exists()
    more = corpus / "more"
    assert train.cli(["--resume", str(out), "--out", str(more), "--steps", "6", "--minutes", "5"]) == 0
    st = state(more)
    assert (st["steps"], st["horizon"], st["horizon_from"], st["resumed_from_step"]) == (6, 6, "--steps", 3)
    with pytest.raises(SystemExit):  # a kind that does not match the checkpoint
        train.cli(["--resume", str(out), "--kind", "hybrid", "--out", str(corpus / "x"), "--steps", "4"])


def test_precision_settings():
    assert train.precision(torch.device("cuda")) == (torch.bfloat16, True)
    assert train.precision(torch.device("cuda"), "fp32") == (None, False)
    assert train.precision(torch.device("cpu")) == (None, False)
    assert train.precision(torch.device("cpu"), "bf16") == (torch.bfloat16, False)


def test_bf16_autocast_reaches_the_loss(corpus, monkeypatch):
    """--precision bf16 (the GPU default) runs the loss under autocast; here on the CPU."""
    from engine.models.asarm import AsArmModel

    seen = []
    real = AsArmModel.training_loss

    def spy(self, *a, **k):
        seen.append(torch.is_autocast_enabled("cpu") and torch.get_autocast_dtype("cpu") == torch.bfloat16)
        return real(self, *a, **k)

    monkeypatch.setattr(AsArmModel, "training_loss", spy)
    out = corpus / "bf16"
    assert train.cli(TINY + ["--out", str(out), "--steps", "2", "--minutes", "5", "--precision", "bf16"]) == 0
    assert seen[:2] == [True, True] and state(out)["precision"] == "bf16"
    seen.clear()
    assert train.cli(TINY + ["--out", str(out), "--steps", "2", "--minutes", "5"]) == 0  # auto on a CPU: fp32
    assert seen[:2] == [False, False]


@pytest.mark.slow  # two interpreter start-ups and a 3 s budget: ~1 min on the shared 2-core machine
def test_models_gpu_script_runs_the_trainer(corpus):
    """lab/train_all_gpu.sh (make models-gpu) on the CPU with one tiny job: the real driver."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = corpus / "gpu-out"
    env = dict(os.environ, MINUTES="0.05", OUT=str(out), PY=sys.executable, DEVICE="cpu",
               EXTRA="--threads 1", JOBS="protein-judge:judge:protein:16:2:2:32:2")
    r = subprocess.run(["bash", str(root / "lab" / "train_all_gpu.sh")], cwd=root, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr + (out / "logs" / "train-protein-judge.log").read_text()
    st = state(out / "protein-judge")
    assert st["kind"] == "judge" and st["horizon_from"] == "time budget" and (out / "protein-judge" / "trainer.pt").is_file()
    assert "protein-judge" in r.stdout and "all jobs done" in r.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_models_gpu_script_refuses_a_missing_gpu(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = dict(os.environ, OUT=str(tmp_path / "o"), PY=sys.executable, DEVICE="cuda")
    r = subprocess.run(["bash", str(root / "lab" / "train_all_gpu.sh")], cwd=root, env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().startswith("error: device 'cuda'")
    assert not list((tmp_path / "o" / "logs").iterdir()), "no job may start"


def test_init_starts_from_the_checkpoints_weights(corpus):
    """--init DIR: a new run whose weights start as DIR's (a near-zero learning rate keeps them), not
    a fresh initialisation; its size flags are ignored, and --resume with --init is refused."""
    first = corpus / "first"
    assert train.cli(TINY + ["--out", str(first), "--steps", "3", "--seed", "1"]) == 0
    ft = corpus / "ft"
    small_lr = ["--steps", "1", "--lr", "1e-12", "--warmup", "1"]
    assert train.cli(TINY[:2] + TINY[2:4] + ["--hidden", "64", "--threads", "1", "--save-minutes", "100",
                                             "--seq-len", "16", "--batch", "2", "--init", str(first),
                                             "--out", str(ft), *small_lr]) == 0
    a, b = load_file(str(first / "model.safetensors")), load_file(str(ft / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert state(ft)["init"] == str(first)
    fresh = corpus / "fresh"
    assert train.cli(TINY + ["--out", str(fresh), *small_lr]) == 0
    c = load_file(str(fresh / "model.safetensors"))
    assert any(not torch.equal(a[k], c[k]) for k in a)
    with pytest.raises(SystemExit):
        train.cli(TINY + ["--out", str(corpus / "x"), "--init", str(first), "--resume", str(first)])


def test_ptp_head_trains_and_resumes_with_its_teacher(corpus):
    """A PTP head distils from a frozen AS-ARM that is not saved with it: --resume must find the
    teacher again (config.teacher) instead of failing on the first step."""
    teacher = corpus / "teacher"
    assert train.cli(TINY + ["--out", str(teacher), "--steps", "2", "--minutes", "5"]) == 0
    head = corpus / "head"
    ptp = ["--kind", "ptp", "--domain", "protein", "--teacher", str(teacher), "--layers", "1", "--heads", "2",
           "--ffn", "32", "--seq-len", "16", "--batch", "2", "--threads", "1", "--k", "3", "--window", "2",
           "--rate-min", "0.8"]
    assert train.cli(ptp + ["--out", str(head), "--steps", "2", "--minutes", "5"]) == 0
    cfg = json.loads((head / "config.json").read_text())
    assert (cfg["window"], cfg["rate_min"], cfg["k"]) == (2, 0.8, 3)
    assert train.cli(["--resume", str(head), "--teacher", str(teacher), "--steps", "4", "--minutes", "5",
                      "--threads", "1"]) == 0
    assert state(head)["steps"] == 4 and state(head)["kind"] == "ptp"
