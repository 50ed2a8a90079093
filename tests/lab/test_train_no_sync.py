"""The GPU training path never waits for the device inside a step: the AS-ARM loss and the PTP
distillation run whole on the `meta` device, where every data-dependent read (`.item()`, `int()`,
`float()`, boolean indexing, `nonzero`) raises, because a meta tensor has a shape and no values.
On a GPU each of those would be a host sync per step. The PTP rounds are cut on the host from one
copy of the batch (`build_rounds`'s `.cpu()`), which the test answers with the host ids and counts."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from engine.models.asarm_core import DEFAULTS, AsArmLite
from engine.models.ptp import PtpConfig, PtpHead

CFG = dict(vocab_size=64, hidden_size=16, num_layers=2, num_heads=2, intermediate_size=32, max_positions=33,
           special_token_ids=[0, 1, 2, 3], rope_theta=10000.0, dropout=0.0)


def meta_asarm() -> AsArmLite:
    with torch.device("meta"):
        return AsArmLite(SimpleNamespace(**{**DEFAULTS, **CFG}))


def host_batch(b: int = 3, l: int = 17) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, CFG["vocab_size"], (b, l), generator=g)
    ids[:, 0] = 1
    masked = torch.rand(b, l, generator=g) < 0.6
    masked[:, 0], masked[:, 1] = False, True
    return ids, masked


def test_meta_tensors_refuse_every_read_a_sync_would_be():
    """The detector is live: each kind of host read raises on meta."""
    x = torch.ones(4, device="meta")
    for read in (lambda: x.sum().item(), lambda: int(x[0]), lambda: float(x[0]), lambda: x[x > 0],
                 lambda: x.nonzero()):
        with pytest.raises(Exception):  # noqa: B017  (which error depends on the torch build: any refusal)
            read()


def test_the_asarm_loss_runs_on_meta():
    model = meta_asarm()
    ids, masked = host_batch()
    loss = model.joint_loss(ids.to("meta"), masked.to("meta"))
    assert loss.device.type == "meta" and loss.shape == ()
    loss.backward()  # the backward pass too
    assert model.head.weight.grad is not None and model.head.weight.grad.device.type == "meta"


def test_the_asarm_training_loss_draws_its_masks_without_a_sync():
    model = meta_asarm()
    ids, _ = host_batch()
    gen = torch.Generator().manual_seed(0)  # (no meta generator: the masks are drawn here, then moved)
    orig = torch.rand

    def rand_to_meta(*a, **k):
        k.pop("device", None)
        return orig(*a, **k).to("meta")

    torch.rand = rand_to_meta
    try:
        loss = model.training_loss(ids.to("meta"), 0.5, gen)
    finally:
        torch.rand = orig
    assert loss.device.type == "meta"


def test_the_ptp_distillation_step_runs_on_meta_after_one_host_copy(monkeypatch):
    teacher = meta_asarm()
    with torch.device("meta"):
        head = PtpHead(PtpConfig(vocab_size=CFG["vocab_size"], hidden_size=16, num_layers=1, num_heads=2,
                                 intermediate_size=32, max_positions=33, special_token_ids=[0, 1, 2, 3], k=3,
                                 mode="onepass", prev_rank=4))
    head.attach_teacher(teacher)
    ids, _ = host_batch()
    copies = []
    to_host = torch.Tensor.cpu

    def one_copy(t, *a, **k):  # the batch's one device-to-host copy: meta has no values, so hand the host's
        if t.device.type == "meta":
            copies.append(tuple(t.shape))
            return ids.clone()
        return to_host(t, *a, **k)

    monkeypatch.setattr(torch.Tensor, "cpu", one_copy)
    loss, stats = head.distill(ids.to("meta"), torch.Generator().manual_seed(0), stats=False)
    assert loss.device.type == "meta" and stats == {} and copies == [tuple(ids.shape)]
    loss.backward()
    with pytest.raises(Exception):  # noqa: B017  (the monitoring numbers are a sync: not every step)
        head.distill(ids.to("meta"), torch.Generator().manual_seed(0), stats=True)
