"""lab/train_speed.py and its use in `python -m engine train`: the fused/foreach optimizer,
windows built on the model's device (no per-step copy), the batch probe, tokens/s in the log and
train_state.json, and the bf16 path with the probe (all on the CPU)."""

from __future__ import annotations

import json

import pytest
import torch

from lab import train, train_speed
from lab.token_windows import batches

from .test_train import TINY, corpus, state  # noqa: F401  (corpus: a fixture)


def test_fused_adamw_where_the_device_has_it_else_foreach(monkeypatch):
    p = [torch.nn.Parameter(torch.zeros(3))]
    monkeypatch.setattr(train_speed, "fused_devices", lambda: ["cpu", "cuda"])
    opt, kind = train_speed.make_optimizer(p, 1e-3)
    assert kind == "fused" and opt.defaults["fused"] is True
    monkeypatch.setattr(train_speed, "fused_devices", lambda: ["cuda"])  # a torch without CPU fused kernels
    opt, kind = train_speed.make_optimizer(p, 1e-3)
    assert kind == "foreach" and opt.defaults["foreach"] is True and not opt.defaults["fused"]
    p[0].grad = torch.ones(3)
    opt.step()  # it steps
    assert torch.all(p[0] < 0)


def test_fused_refused_falls_back_to_foreach(monkeypatch):
    """A dtype the fused kernel refuses (float64 on torch builds without it) must not stop training."""
    real = torch.optim.AdamW

    def picky(params, **kw):
        if kw.get("fused"):
            raise RuntimeError("fused=True requires ...")
        return real(params, **kw)

    monkeypatch.setattr(train_speed, "fused_devices", lambda: ["cpu"])
    monkeypatch.setattr(torch.optim, "AdamW", picky)
    _, kind = train_speed.make_optimizer([torch.nn.Parameter(torch.zeros(2))], 1e-3)
    assert kind == "foreach"


def test_device_windows_equal_the_host_windows_and_live_on_the_device():
    stream = torch.arange(1000) % 97 + 4
    w = train_speed.DeviceWindows(stream=stream, seq_len=16, bos_id=1, device=torch.device("cpu"), seed=5)
    assert w.stream.device == torch.device("cpu") and w.stream.dtype == torch.int32
    host = batches(stream, 16, 4, torch.Generator().manual_seed(5), 1)
    for _ in range(3):
        a, b = w.take(4), next(host)
        assert torch.equal(a, b) and a.dtype == torch.long and a.device == w.device
    with pytest.raises(ValueError):
        train_speed.DeviceWindows(stream=stream[:10], seq_len=16, bos_id=1, device=torch.device("cpu"))


def test_training_reads_the_windows_without_a_copy(corpus, monkeypatch):  # noqa: F811
    """The trainer builds its windows from a stream already on the model's device, and the ids the
    loss sees are those very tensors (no .to() copy per step)."""
    from engine.models.asarm import AsArmModel

    made, seen, devices = [], [], []
    real_take, real_loss = train_speed.DeviceWindows.take, AsArmModel.training_loss

    def take(self, batch, gen=None):
        out = real_take(self, batch, gen)
        made.append(out.data_ptr())
        devices.append(self.stream.device)
        return out

    def loss(self, ids, progress, gen):
        seen.append((ids.data_ptr(), ids.device == self.device, gen.device == self.device))
        return real_loss(self, ids, progress, gen)

    monkeypatch.setattr(train_speed.DeviceWindows, "take", take)
    monkeypatch.setattr(AsArmModel, "training_loss", loss)
    assert train.cli(TINY + ["--out", str(corpus / "w"), "--steps", "3", "--minutes", "5"]) == 0
    train_steps = seen[:3]  # then the final save's validation loss
    assert [p for p, _, _ in train_steps] == made[:3]
    assert all(on_dev and gen_on_dev for _, on_dev, gen_on_dev in train_steps)
    assert devices and all(d.type == "cpu" for d in devices)


def fake_probe(curve: dict[int, float], oom_at: int | None = None, **kw):
    """probe_batch against a made-up device: batch b takes b / curve[b] seconds per step."""
    t = [0.0]

    def step(b):
        if oom_at is not None and b >= oom_at:
            raise torch.OutOfMemoryError("fake")
        t[0] += b * 10 / curve[b]

    return train_speed.probe_batch(step, 10, kw.pop("max_tokens", 10**9), clock=lambda: t[0],
                                   log=lambda s: None, **kw)


def test_probe_picks_the_smallest_batch_near_the_best_speed():
    curve = {8: 100.0, 16: 190.0, 32: 200.0, 64: 205.0, 128: 150.0}
    r = fake_probe(curve, max_tokens=1280)
    assert [x["batch"] for x in r.rows] == [8, 16, 32, 64, 128]  # doubling up to the tokens-per-step cap
    assert r.rows[0]["tokens_per_s"] == pytest.approx(100.0)
    assert r.batch == 16  # 190 >= 0.9 x 205
    assert fake_probe(curve, max_tokens=1280, tolerance=0.99).batch == 64


def test_probe_is_bounded_by_memory_and_the_cap():
    curve = {8: 100.0, 16: 200.0, 32: 400.0, 64: 800.0, 128: 1600.0}
    assert fake_probe(curve, max_tokens=320).batch == 32  # 32 x 10 tokens: the cap
    r = fake_probe(curve, oom_at=64)
    assert r.batch == 32 and "out of memory" in r.reason and len(r.rows) == 3
    full = iter([True, False])
    r = fake_probe(curve, memory_ok=lambda: next(full))
    assert r.batch == 16 and "memory" in r.reason
    with pytest.raises(RuntimeError):
        fake_probe(curve, oom_at=1)


def test_tokens_per_second_in_the_log_and_the_state(corpus, capsys):  # noqa: F811
    out = corpus / "tps"
    assert train.cli(TINY + ["--out", str(out), "--steps", "4", "--minutes", "5", "--quiet"]) == 0
    st = state(out)
    assert st["tokens_per_second"] > 0 and st["tokens_seen"] == 4 * 2 * 16
    assert st["optimizer"].startswith("AdamW (") and st["batch_probe"] is None
    log = capsys.readouterr().out
    assert "tokens/s" in log and f"{st['tokens_per_second']:,.0f} tokens/s" in log
    more = corpus / "tps2"  # a resumed run adds its tokens to the saved count
    assert train.cli(["--resume", str(out), "--out", str(more), "--steps", "6", "--minutes", "5", "--quiet"]) == 0
    assert state(more)["tokens_seen"] == 6 * 2 * 16


def test_bf16_with_the_batch_probe_runs(corpus):  # noqa: F811
    """The GPU's settings on the CPU: bf16 autocast and --batch auto (the probe picks, the run uses it)."""
    out = corpus / "auto"
    i = TINY.index("--batch")
    args = TINY[:i] + TINY[i + 2 :]
    assert train.cli(args + ["--batch", "auto", "--max-batch-tokens", "300", "--precision", "bf16", "--out", str(out),
                             "--steps", "2", "--minutes", "5", "--quiet"]) == 0
    st = state(out)
    probe = st["batch_probe"]
    assert [r["batch"] for r in probe["rows"]] == [8, 16]  # 16 x 17 tokens <= 300 < 32 x 17
    assert st["batch"] == probe["chosen"] and st["precision"] == "bf16" and st["tokens_seen"] == 2 * 16 * st["batch"]
    assert json.loads((out / "config.json").read_text())["model_type"] == "asarm"


def test_the_probe_gets_at_most_a_tenth_of_the_run(corpus, monkeypatch):  # noqa: F811
    """The probe runs inside --minutes: on a slow device it must not leave no time to train."""
    seen = []
    real = train.probe_batch

    def spy(*a, **k):
        seen.append(k["budget_s"])
        return real(*a, **k)

    monkeypatch.setattr(train, "probe_batch", spy)
    i = TINY.index("--batch")
    args = TINY[:i] + TINY[i + 2 :] + ["--batch", "auto", "--max-batch-tokens", "300", "--steps", "1", "--quiet"]
    assert train.cli(args + ["--out", str(corpus / "p1"), "--minutes", "1", "--probe-seconds", "30"]) == 0
    assert train.cli(args + ["--out", str(corpus / "p2"), "--minutes", "10", "--probe-seconds", "30"]) == 0
    assert seen == [6.0, 30.0]
