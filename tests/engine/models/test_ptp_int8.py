"""assd-ptp drafts on a CPU with an int8 copy of the PTP head: a copy made once per head, close to
the float head's residuals, never used for a head in training or off the CPU, and the sampler stays
exact with it (the enumeration tests of tests/engine/samplers/test_ptp.py run through the catalogue entry,
which drafts with this copy)."""

from __future__ import annotations

import torch

from engine.models.ptp import PtpConfig, PtpHead
from engine.models.ptp_int8 import drafting_head, int8_copy


def _head(prev_rank: int = 4) -> PtpHead:
    cfg = PtpConfig(vocab_size=40, hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64,
                    max_positions=64, mode="onepass", prev_rank=prev_rank, special_token_ids=[0, 1])
    torch.manual_seed(0)
    head = PtpHead(cfg).eval()
    with torch.no_grad():  # a trained head's output layers are not zero
        head.out.weight.normal_(0, 0.5)
        if prev_rank:
            head.prev_out.weight.normal_(0, 0.5)
    return head


def test_the_int8_copy_is_made_once_and_drafts_close_to_the_float_head():
    head = _head()
    twin = drafting_head(head)
    assert twin is not head and drafting_head(head) is twin and int8_copy(head) is twin
    assert "_int8_copy" not in dict(head.named_modules()) and not any("int8" in k for k in head.state_dict())
    hid, e_prev, pos = torch.randn(1, 5, 32), torch.randint(2, 40, (1, 5)), torch.arange(3, 8)[None]
    u_prev = torch.rand(1, 5, dtype=torch.float64)
    with torch.no_grad():
        (r32, g32), (r8, g8) = head.draft_pass(hid, e_prev, u_prev, pos), twin.draft_pass(hid, e_prev, u_prev, pos)
        assert (r8 - r32).abs().max() < 0.1 * r32.abs().max() and not torch.equal(r8, r32)
        t32, t8 = head.prev_term(g32[0, 1], 7), twin.prev_term(g8[0, 1], 7)
        assert t8.shape == t32.shape == (40,) and (t8 - t32).abs().max() < 0.1 * t32.abs().max()


def test_the_float_head_is_kept_when_asked_in_training_or_for_other_models():
    head = _head()
    assert drafting_head(head, int8=False) is head
    head.train()
    assert drafting_head(head) is head
    other = torch.nn.Linear(3, 3)
    assert drafting_head(other) is other


def test_a_float64_head_drafts_with_its_own_arithmetic():
    head = _head().double()
    assert drafting_head(head) is head


def test_a_head_without_the_low_rank_term_gets_its_copy_too():
    head = _head(prev_rank=0)
    twin = drafting_head(head)
    assert twin is not head and not hasattr(twin, "prev_out")
    with torch.no_grad():
        resid, gate = twin.draft_pass(torch.randn(1, 3, 32), torch.randint(2, 40, (1, 3)),
                                      torch.rand(1, 3, dtype=torch.float64), torch.arange(3)[None])
    assert resid.shape == (1, 3, 40) and gate is None


def test_the_causal_pass_is_the_masked_pass_with_or_without_stacked_projections():
    """Block.causal (the one-pass round: no mask built, Q|K|V from one layer when the drafting copy
    has one) computes what the general cached pass computes for the same rows."""
    head = _head()
    x, pos = torch.randn(1, 6, 32), torch.arange(4, 10)[None]
    with torch.no_grad():
        want = head._extend(x, pos, [])
        r = head.blocks[0].rope(pos, x)

        def causal() -> torch.Tensor:
            y = x
            for blk in head.blocks:
                y = blk.causal(y, r)
            return y

        assert torch.allclose(causal(), want, atol=1e-5)
        for blk in head.blocks:  # the stacked layer, in float32: the same numbers up to rounding
            blk.qkv_proj = torch.nn.Linear(32, 96, bias=False)
            blk.qkv_proj.weight.copy_(torch.cat([blk.q.weight, blk.k.weight, blk.v.weight]))
        assert torch.allclose(causal(), want, atol=1e-5)
        full, first = causal(), head._extend(x[:, :3], pos[:, :3], [])
        assert torch.allclose(full[:, :3], first, atol=1e-5), "a row must not see the rows after it"
    twin = int8_copy(_head())
    assert all(isinstance(b.qkv_proj.layer, torch.ao.nn.quantized.dynamic.Linear) for b in twin.blocks)
    assert [n for n, mod in twin.named_modules() if type(mod) is torch.nn.Linear] == [], "every linear layer in int8"


def test_the_int8_copy_keeps_each_row_blind_to_the_uniforms_after_it():
    """Exactness of assd-ptp with the int8 copy: row j's residual and gate are functions of u_1..u_{j-1}
    only, bitwise. Row j + 1 reads u_j; with one activation scale per call over all rows (dynamic
    quantisation fed the round at once) changing u_j would move rows <= j, and p_j would depend on
    the uniform d_j is drawn with. Here each row has its own scale (RowInt8)."""
    head = _head()
    with torch.no_grad():  # a trained head's activations: large and varied enough for the scales to move
        head.u_embed.weight.normal_(0, 0.5)  # zero at init: an untrained head reads no uniform
        for blk in head.blocks:
            blk.mlp[2].weight.normal_(0, 0.5)
    twin = int8_copy(head)
    hid, e_prev, pos = torch.randn(1, 5, 32), torch.randint(2, 40, (1, 5)), torch.arange(3, 8)[None]
    u = torch.tensor([[0.0, 0.2, 0.4, 0.6, 0.8]], dtype=torch.float64)
    with torch.no_grad():
        r, g = twin.draft_pass(hid, e_prev, u, pos)
        for j in range(1, 5):  # u_prev[:, j] = u_j is read by row j alone
            later = u.clone()
            later[0, j] = 0.999
            r2, g2 = twin.draft_pass(hid, e_prev, later, pos)
            assert torch.equal(r2[:, :j], r[:, :j]) and torch.equal(g2[:, :j], g[:, :j]), f"rows < {j} moved with u of row {j}"
            assert not torch.equal(r2[:, j], r[:, j]), "the row that reads it does move"


def test_row_int8_gives_every_row_what_it_gives_that_row_alone_in_one_call():
    """RowInt8 on a [2, 5, 4] input (10 rows, more rows than features, of very different ranges):
    each output row is, bitwise, what RowInt8 gives that row alone (its own scale), close to the
    float layer, from ONE call of the int8 layer; the plain int8 layer fed the rows at once (one
    scale for all) gives other numbers."""
    import warnings

    from engine.models.ptp_int8 import RowInt8, _int8

    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 3)
    layer = _int8(lin)
    x = torch.randn(2, 5, 4) * torch.arange(1, 11, dtype=torch.float32).view(2, 5, 1)
    with torch.no_grad():
        with torch.profiler.profile() as prof:
            y = layer(x)
        calls = [e for e in prof.events() if e.name == "quantized::linear_dynamic"]
        assert y.shape == (2, 5, 3) and len(calls) == 1
        want = torch.stack([torch.stack([layer(x[b, i : i + 1])[0] for i in range(5)]) for b in range(2)])
        assert torch.equal(y, want)
        # the int8 op called directly gives what the quantised layer's own forward gives (its reduce_range
        # included: the 7-bit activations that keep AVX2's 16-bit sums from saturating)
        rows = x.reshape(10, 4)
        size = rows.abs().amax(-1, keepdim=True)
        via_layer = layer.layer(torch.cat([rows / size, layer.anchor]))[:-1] * size + layer.bias
        assert torch.allclose(y.reshape(10, 3), via_layer, rtol=1e-6, atol=1e-6)
        assert (y - lin(x)).abs().max() < 0.05 * lin(x).abs().max()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            plain = torch.ao.quantization.quantize_dynamic(torch.nn.Sequential(lin), {torch.nn.Linear},
                                                           dtype=torch.qint8)[0]
        assert not torch.equal(plain(x.reshape(10, 4)).view(2, 5, 3), want), "one scale for all rows would differ"
    assert isinstance(layer, RowInt8)
