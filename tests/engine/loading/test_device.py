"""The device setting (INFILL_DEVICE / --device / device=) reaches every place that makes a tensor.

No GPU here, so the accelerator is played by torch's `meta` device: tensors with shapes and no data.
Like CUDA it refuses to mix devices in one op, and nothing can be read back from it except through
an explicit copy to the CPU. The mode below fakes that one copy (random logits of the right shape),
so a whole sampler run goes through: a tensor made on the CPU and fed to the model, or a value read
off the device anywhere but in `host64`, fails the test (eval may also read back its scalar losses).
"""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

from engine.api import InfillRun, joint_log_prob
from engine.cli import main as engine_main
from engine.errors import BadParameterError
from engine.loading import registry
from engine.loading.device import resolve_device
from engine.trace import decided_tokens
from tests.engine.samplers.test_hybrid import save_tiny_hybrid
from tests.support.tiny import masked_input, save_tiny_asarm

META = torch.device("meta")


class FakeHost(TorchFunctionMode):
    """Copies from the meta device to the CPU return seeded random data (counted); an op mixing
    devices raises, as on CUDA (0-dim CPU tensors and CPU index tensors allowed, as there)."""

    def __init__(self, scalar_reads: bool = False):
        super().__init__()
        self.copies = 0
        self.scalar_reads = scalar_reads
        self.gen = torch.Generator().manual_seed(0)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in (torch.Tensor.to, torch.Tensor.cpu) and isinstance(args[0], torch.Tensor) \
                and args[0].device.type == "meta":
            target = kwargs.get("device", "cpu" if func is torch.Tensor.cpu else None)
            dtype = kwargs.get("dtype", args[0].dtype)
            for a in args[1:]:
                if isinstance(a, (str, torch.device)):
                    target = a
                elif isinstance(a, torch.dtype):
                    dtype = a
            if target is not None and torch.device(target).type == "cpu":
                self.copies += 1
                if dtype == torch.bool:
                    return torch.zeros(args[0].shape, dtype=torch.bool)
                return torch.randn(args[0].shape, generator=self.gen, dtype=torch.float64).to(dtype)
        if func not in (torch.Tensor.__getitem__, torch.Tensor.__setitem__):  # CUDA takes CPU indices
            devices = {t.device.type for t in tree_flatten((args, kwargs))[0]
                       if isinstance(t, torch.Tensor) and not (t.device.type == "cpu" and t.dim() == 0)}
            if len(devices) > 1:  # the meta kernels of some ops (embedding) do not check: CUDA does
                raise RuntimeError(f"{getattr(func, '__name__', func)} mixes devices {sorted(devices)}")
        if self.scalar_reads and func in (torch.Tensor.__float__, torch.Tensor.item) and args[0].device.type == "meta":
            self.copies += 1  # a scalar read back (a loss): a sync on CUDA, fine outside the sampler loop
            return 1.0
        return func(*args, **kwargs)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("dev")
    return save_tiny_asarm(root / "tiny-asarm"), save_tiny_hybrid(root / "tiny-hybrid")


SAMPLERS = [("sequential", 0), ("assd", 0), ("assd-bonus", 0), ("assd-cache", 0), ("assd-pipelined", 0),
            ("assd-ngram", 0), ("mdm", 1), ("self-spec", 1), ("assd-diffusion", 0)]


@pytest.mark.parametrize("sampler,which", SAMPLERS)
def test_every_sampler_runs_with_the_model_on_the_device(folders, sampler, which):
    asarm, hybrid = folders
    mi = masked_input(registry.load(str(asarm)).codec, {0: "a", 3: "c"}, 6)
    run = InfillRun(masked_input=mi, model=str(folders[which]), sampler=sampler, k=3, steps=2, dtau=0.5, seed=1,
                    draft_model=str(hybrid), device=META)
    assert next(run.lm.model.parameters()).device == META and run.lm.device == "meta"
    with FakeHost() as host:
        steps = list(run.stream())
        res = run.result(with_log_prob=run.lm.kind == "asarm")  # the joint log-prob pass too
    assert host.copies > 0, "the model's outputs never came back through host64"
    assert set(decided_tokens(steps)) == set(mi.masked) and res.masked_tokens == 4  # the run went to the end


def test_xlnet_adapter_on_the_device(tmp_path):
    from tests.engine.models.test_xlnet_adapter import save_tiny_xlnet

    lm = registry.load(str(save_tiny_xlnet(tmp_path / "tiny-xlnet")))
    mi = masked_input(lm.codec, {0: "a", 3: "c"}, 5)
    for sampler in ("sequential", "assd"):
        run = InfillRun(masked_input=mi, model=str(lm.path), sampler=sampler, k=2, device=META)
        with FakeHost() as host:
            list(run.stream())
            joint_log_prob(run.lm, mi, run.result(with_log_prob=False).tokens)
        assert host.copies > 0


def test_eval_heldout_on_the_device(folders, monkeypatch):
    """engine eval builds its batches on the model's device (masks drawn on the CPU, then moved)."""
    from lab import evaluate

    asarm, hybrid = folders
    x = torch.tensor([[1, 4, 5, 6, 4, 5, 6]])
    monkeypatch.setattr(evaluate, "_windows", lambda *a, **k: x)
    monkeypatch.setenv("INFILL_DEVICE", "cpu")
    # boolean-mask selection has a data-dependent shape: let meta assume every element is selected
    monkeypatch.setattr(torch.fx.experimental._config, "meta_nonzero_assume_all_nonzero", True)
    for folder in (asarm, hybrid):
        lm = registry.load(str(folder), device=META)
        monkeypatch.setattr(evaluate, "load", lambda name, lm=lm: lm)
        with FakeHost(scalar_reads=True):
            out = evaluate.heldout_nll("x")
        assert out["test_tokens"] == 6


# ------------------------------------------------------------------ the setting itself


def test_auto_picks_cuda_when_available(monkeypatch):
    monkeypatch.setenv("INFILL_DEVICE", "")  # auto (and restored after the test)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device() == torch.device("cuda")
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device() == torch.device("cpu")
    monkeypatch.setenv("INFILL_DEVICE", "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device() == torch.device("cpu")


def test_auto_reaches_the_model_load(folders, monkeypatch):
    """With a (pretend) GPU, auto moves the model to CUDA: this CPU-only torch then refuses."""
    monkeypatch.setenv("INFILL_DEVICE", "")  # auto (and restored after the test)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises((AssertionError, RuntimeError), match="CUDA"):
        InfillRun("ab[MASK:2]c", model=str(folders[0]), sampler="assd")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("setting", ["cuda", "cuda:0"])
def test_cuda_without_a_gpu_is_one_clear_error(setting, folders, monkeypatch):
    monkeypatch.setenv("INFILL_DEVICE", setting)
    with pytest.raises(BadParameterError, match="no CUDA GPU"):
        InfillRun("ab[MASK:2]c", model=str(folders[0]), sampler="assd")
    monkeypatch.setenv("INFILL_DEVICE", "")
    with pytest.raises(BadParameterError, match="no CUDA GPU"):
        InfillRun("ab[MASK:2]c", model=str(folders[0]), sampler="assd", device=setting)


def test_unknown_device_is_refused(monkeypatch):
    monkeypatch.setenv("INFILL_DEVICE", "gpu0")
    with pytest.raises(BadParameterError, match="Unknown device 'gpu0'.*auto, cpu, cuda"):
        resolve_device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("argv", [
    ["infill", "ab[MASK:2]c"],
    ["bench", "assd", "--samples", "1"],
    ["bench", "self-spec", "--samples", "1"],
    ["report", "--quick", "--out", "/nonexistent/never-written.md"],
    ["eval", "--domain", "text"],
    ["train", "--kind", "asarm", "--domain", "protein", "--out", "/nonexistent/never-written", "--steps", "1"],
])
@pytest.mark.parametrize("how", ["flag", "env"])
def test_every_command_honours_the_setting(argv, how, capsys, monkeypatch):
    """--device cuda (or INFILL_DEVICE=cuda) on a machine without one: exit 2, one line, no run."""
    monkeypatch.setenv("INFILL_DEVICE", "")  # auto (and restored after the test)
    if how == "flag":
        argv = argv + ["--device", "cuda"]
    else:
        monkeypatch.setenv("INFILL_DEVICE", "cuda")
    assert engine_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: device 'cuda'") and "no CUDA GPU" in err and "\n" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("how", ["flag", "env"])
def test_app_refuses_to_start_on_a_missing_gpu(how, capsys, monkeypatch):
    import app.__main__ as app_main

    monkeypatch.setattr(app_main, "serve", lambda *a: pytest.fail("the app started anyway"))
    monkeypatch.setenv("INFILL_DEVICE", "")  # auto (and restored after the test)
    argv = ["--device", "cuda"] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("INFILL_DEVICE", "cuda")
    with pytest.raises(SystemExit) as e:
        app_main.main(argv)
    assert e.value.code == 2
    assert "no CUDA GPU" in capsys.readouterr().err


def test_app_serves_on_the_device_it_is_given(monkeypatch):
    import app.__main__ as app_main

    seen = []
    monkeypatch.setattr(app_main, "serve", lambda *a: seen.append(resolve_device()))
    monkeypatch.setenv("INFILL_DEVICE", "")  # auto (and restored after the test)
    app_main.main(["--device", "cpu"])
    assert seen == [torch.device("cpu")]
