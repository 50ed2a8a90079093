"""assd-ptp drafts on a CPU with the head's CpuDrafter (int8 big layers, float32 input layer and
low-rank term, few operations): made once per head, close to the float head's residuals, every row
blind to the uniforms after it, never used for a head in training, off the CPU or in draft mode, and
the sampler stays exact with it (the enumeration tests of tests/engine/samplers/test_ptp.py run through
the catalogue entry, which drafts with it)."""

from __future__ import annotations

import torch

from engine.models.ptp import PtpConfig, PtpHead
from engine.models.ptp_int8 import CpuDrafter, drafting_head


def _head(prev_rank: int = 4, layers: int = 2, window: int = 0, output_layer: bool = True) -> PtpHead:
    """A tiny one-pass head with a trained head's kind of weights: no layer at its zero init, biases
    and blocks large enough that every term of the pass shows in its output."""
    cfg = PtpConfig(vocab_size=40, hidden_size=32, num_layers=layers, num_heads=2, intermediate_size=64,
                    max_positions=64, mode="onepass", prev_rank=prev_rank, special_token_ids=[0, 1], window=window,
                    output_layer=output_layer)
    torch.manual_seed(0)
    head = PtpHead(cfg).eval()
    with torch.no_grad():
        for name, prm in head.named_parameters():
            if name.endswith("bias") or name == "window_embed":
                prm.normal_(0, 0.5)
            elif name == "norm.weight":  # not all ones: the drafter folds it into the gate's weights
                prm.normal_(1.0, 0.3)
            elif name.startswith("blocks.") and prm.dim() > 1:
                prm.normal_(0, 0.4)
        if head.out is not None:
            head.out.weight.normal_(0, 0.5)
        head.u_embed.weight.normal_(0, 0.5)
        head.tok_embed.weight.normal_(0, 0.5)
        if prev_rank:
            head.prev_out.weight.normal_(0, 0.5)
            head.prev_gate.weight.normal_(0, 0.5)
    return head


def _round(m: int = 5, first: int = 3) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A round's inputs to draft_pass: states, e_prev, u_prev, positions."""
    return (torch.randn(1, m, 32), torch.randint(2, 40, (1, m)), torch.rand(1, m, dtype=torch.float64),
            torch.arange(first, first + m)[None])


def _close(a, b: torch.Tensor, tol: float = 0.15) -> bool:
    """int8 rounding, not another function: within tol of the float head's largest value (the
    drafter's gate and low-rank term are NumPy arrays)."""
    a = torch.as_tensor(a)
    return a.shape == b.shape and bool((a - b).abs().max() < tol * b.abs().max())


def _pass(twin: CpuDrafter, *args) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    """The drafter's pass with its NumPy gate as a tensor, to compare with the float head's."""
    resid, gate = twin.draft_pass(*args)
    return resid, None if gate is None else torch.from_numpy(gate)


def _term(twin: CpuDrafter, gate: torch.Tensor, prev: int) -> torch.Tensor:
    """The drafter's low-rank term (NumPy) of a gate row given as a tensor, as a tensor."""
    return torch.from_numpy(twin.prev_term(gate.numpy(), prev))


def test_the_cpu_drafter_is_made_once_and_drafts_close_to_the_float_head():
    head = _head()
    twin = drafting_head(head)
    assert isinstance(twin, CpuDrafter) and drafting_head(head) is twin
    assert not any("int8" in k or "drafter" in k for k in head.state_dict()), "never saved with the head"
    hid, e_prev, u_prev, pos = _round()
    with torch.no_grad():
        (r32, g32), (r8, g8) = head.draft_pass(hid, e_prev, u_prev, pos), _pass(twin, hid, e_prev, u_prev, pos)
        assert _close(r8, r32) and _close(g8, g32) and not torch.equal(r8, r32)
        t32, t8 = head.prev_term(g32[0, 1], 7), _term(twin, g8[0, 1], 7)
        assert t8.shape == t32.shape == (40,) and _close(t8, t32)


def test_the_cpu_drafter_reads_the_window_and_works_without_blocks():
    """A head with a window (its known tokens as extra rows in front) and a head with no block at
    all (rows meet nowhere: each row's residual from its own inputs) draft close to their float heads."""
    for head in (_head(window=3), _head(layers=0), _head(layers=1, window=2)):
        hid, e_prev, u_prev, pos = _round()
        w = head.config.window
        window = (torch.randint(2, 40, (1, w)), torch.arange(3 - w, 3)[None]) if w else None
        twin = drafting_head(head)
        with torch.no_grad():
            (r32, g32) = head.draft_pass(hid, e_prev, u_prev, pos, window)
            (r8, g8) = twin.draft_pass(hid, e_prev, u_prev, pos, window)
        assert _close(r8, r32) and _close(g8, g32), head.config
        assert twin.window_at(9) == head.window_at(9)  # where assd_ptp reads the window's tokens


def test_the_cpu_drafter_takes_the_states_of_a_float64_as_arm():
    """The AS-ARM's states arrive in its dtype (float64 in the exactness tests); the drafter computes
    in float32, so the states are converted: the same residuals as from float32 states."""
    head, (hid, e_prev, u_prev, pos) = _head(), _round()
    twin = drafting_head(head)
    with torch.no_grad():
        r32, g32 = _pass(twin, hid, e_prev, u_prev, pos)
        r64, g64 = _pass(twin, hid.double(), e_prev, u_prev, pos)
    assert torch.equal(r64, r32) and torch.equal(g64, g32)


def test_the_cpu_drafter_makes_one_int8_call_per_big_linear_layer():
    """The point of the drafter is few operations: a round's pass is ONE int8 call per big linear layer
    (Q|K|V together, output, two MLP layers, output projection), one float32 matmul for the state
    and uniform projections together and one for the gate, whatever the number of rows."""
    head, hid, e_prev, u_prev, pos = _head(), *_round()
    twin = drafting_head(head)
    with torch.no_grad(), torch.profiler.profile() as prof:
        twin.draft_pass(hid, e_prev, u_prev, pos)
    names = [e.name for e in prof.events()]
    assert names.count("quantized::linear_dynamic") == 4 * head.config.num_layers + 1
    assert names.count("aten::addmm") == 1 and names.count("aten::mm") == 1
    assert "aten::scaled_dot_product_attention" not in names
    # a layer without a bias in the head has none in the drafter (not a fresh layer's random one)
    assert twin.out.bias is None and all(b.qkv.bias is None and b.o.bias is None for b in twin.blocks)
    assert torch.equal(twin.inp_bias, (head.in_proj.bias + head.u_embed.bias).detach())
    assert all(b.fc1.bias is not None for b in twin.blocks)


def test_the_input_layer_and_the_low_rank_term_keep_float32():
    """int8 there cost a trained code head acceptance (a tested row 0.483 in int8 against 0.513 in float32):
    the uniform's bits share the input layer's scale with states far above 1. Without a block and with
    the output layer aside, the drafter's gate and low-rank term are the float head's to float32
    rounding (a guard: int8 in either place is off by far more than 1e-4; states large beside the bits,
    as a trained AS-ARM's are)."""
    head = _head(layers=0)
    twin = drafting_head(head)
    hid, e_prev, u_prev, pos = _round()
    hid = hid * 30
    with torch.no_grad():
        _, gate = head.draft_pass(hid, e_prev, u_prev, pos)
        _, twin_gate = _pass(twin, hid, e_prev, u_prev, pos)
        assert torch.allclose(twin_gate, gate, rtol=1e-5, atol=1e-4)
        for j, prev in ((1, 7), (3, 39)):
            assert torch.allclose(_term(twin, twin_gate[0, j], prev), head.prev_term(gate[0, j], prev),
                                  rtol=1e-5, atol=1e-4)


def test_the_float_head_is_kept_when_asked_in_training_in_draft_mode_or_for_other_models():
    head = _head()
    assert drafting_head(head, int8=False) is head
    head.train()
    assert drafting_head(head) is head
    other = torch.nn.Linear(3, 3)
    assert drafting_head(other) is other
    draft_mode = PtpHead(PtpConfig(vocab_size=40, hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64,
                                   max_positions=64, mode="draft")).eval()
    assert drafting_head(draft_mode) is draft_mode


def test_a_float64_head_drafts_with_its_own_arithmetic():
    head = _head().double()
    assert drafting_head(head) is head


def test_a_head_without_the_low_rank_term_gets_its_drafter_too():
    head = _head(prev_rank=0)
    twin = drafting_head(head)
    assert isinstance(twin, CpuDrafter) and twin.prev_out is None
    hid, e_prev, u_prev, pos = _round(3, 0)
    with torch.no_grad():
        resid, gate = twin.draft_pass(hid, e_prev, u_prev, pos)
        assert resid.shape == (1, 3, 40) and gate is None and _close(resid, head.draft_pass(hid, e_prev, u_prev, pos)[0])


def test_the_causal_pass_is_the_masked_pass():
    """Block.causal (the float head's one-pass round: no mask built) computes what the general
    cached pass computes for the same rows, and no row sees the rows after it."""
    head = _head()
    x, pos = torch.randn(1, 6, 32), torch.arange(4, 10)[None]
    with torch.no_grad():
        want = head._extend(x, pos, [])
        r = head.blocks[0].rope(pos, x)
        full = x
        for blk in head.blocks:
            full = blk.causal(full, r)
        assert torch.allclose(full, want, atol=1e-5)
        first = head._extend(x[:, :3], pos[:, :3], [])
        assert torch.allclose(full[:, :3], first, atol=1e-5), "a row must not see the rows after it"


def test_the_cpu_drafter_keeps_each_row_blind_to_the_uniforms_after_it():
    """Exactness of assd-ptp with the CPU drafter: row j's residual and gate are functions of u_1..u_{j-1}
    only, bitwise. Row j + 1 reads u_j; with one activation scale per call over all rows (dynamic
    quantisation fed the round at once) changing u_j would move rows <= j, and p_j would depend on
    the uniform d_j is drawn with. Here each row has its own scale (RowInt8), and the attention is causal."""
    for head in (_head(), _head(window=2), _head(layers=0)):  # the last: the bundled heads' shape
        with torch.no_grad():  # a trained head's activations: large and varied enough for the scales to move
            for blk in head.blocks:
                blk.mlp[2].weight.normal_(0, 0.5)
        twin = drafting_head(head)
        hid, e_prev, _, pos = _round()
        w = head.config.window
        window = (torch.randint(2, 40, (1, w)), torch.arange(3 - w, 3)[None]) if w else None
        u = torch.tensor([[0.0, 0.2, 0.4, 0.6, 0.8]], dtype=torch.float64)
        with torch.no_grad():
            r, g = _pass(twin, hid, e_prev, u, pos, window)
            for j in range(1, 5):  # u_prev[:, j] = u_j is read by row j alone
                later = u.clone()
                later[0, j] = 0.999
                r2, g2 = _pass(twin, hid, e_prev, later, pos, window)
                moved = not (torch.equal(r2[:, :j], r[:, :j]) and torch.equal(g2[:, :j], g[:, :j]))
                assert not moved, f"rows < {j} moved with u of row {j}"
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


def test_the_drafter_reads_a_uniform_by_the_same_bits_as_the_head():
    """The drafter spells uniform_bits in NumPy (fewer, cheaper operations than torch's): the same
    32 bits of float32(u), lowest first, for 0 (row 1), values that round up and values near 1."""
    from engine.models.ptp import uniform_bits
    from engine.models.ptp_int8 import _bits

    u = torch.cat([torch.tensor([0.0, 1e-9, 0.5, 0.1, 1 - 1e-9], dtype=torch.float64), torch.rand(200, dtype=torch.float64)])
    assert torch.equal(torch.from_numpy(_bits(u.numpy())), uniform_bits(u))


def test_a_head_without_its_output_layer_drafts_its_gate_and_term_only():
    """With no output layer the drafter reads no [V, d] layer: no residual, the float head's gate and
    low-rank term, and each row's gate still blind to the uniforms after it."""
    head = _head(layers=0, output_layer=False)
    twin = drafting_head(head)
    assert isinstance(twin, CpuDrafter) and twin.out is None
    hid, e_prev, u_prev, pos = _round()
    with torch.no_grad():
        (r32, g32), (r8, g8) = head.draft_pass(hid, e_prev, u_prev, pos), _pass(twin, hid, e_prev, u_prev, pos)
        assert r32 is None and r8 is None and torch.allclose(g8, g32, atol=1e-5)
        assert torch.allclose(_term(twin, g8[0, 2], 7), head.prev_term(g32[0, 2], 7), atol=1e-5)
        for j in range(1, 5):
            later = u_prev.clone()
            later[0, j] = 0.999 if u_prev[0, j] < 0.5 else 0.001
            _, g2 = _pass(twin, hid, e_prev, later, pos)
            assert torch.equal(g2[:, :j], g8[:, :j]) and not torch.equal(g2[:, j], g8[:, j])


def test_a_head_without_blocks_drafts_in_numpy_with_the_heads_arithmetic():
    """The NumPy pass of a head without blocks (the bundled heads' shape): float64 states converted as
    the block path converts them, a head without the low-rank term or without its output layer, and the
    final norm's weight and bias (folded into the gate's weights) all as the float head computes them."""
    for head in (_head(layers=0), _head(layers=0, prev_rank=0), _head(layers=0, output_layer=False)):
        twin = drafting_head(head)
        hid, e_prev, u_prev, pos = _round()
        with torch.no_grad():
            r32, g32 = head.draft_pass(hid, e_prev, u_prev, pos)
            r8, g8 = _pass(twin, hid, e_prev, u_prev, pos)
            r64, g64 = _pass(twin, hid.double(), e_prev, u_prev, pos)
        assert (g8 is None) == (g32 is None) == (head.config.prev_rank == 0)
        assert (r8 is None) == (r32 is None) == (not head.config.output_layer)
        if g8 is not None:
            assert torch.allclose(g8, g32, rtol=1e-5, atol=1e-5) and torch.equal(g64, g8)
        if r8 is not None:
            assert _close(r8, r32) and torch.equal(r64, r8)


def test_a_head_with_blocks_and_no_output_layer_drafts_its_gate_only():
    head = _head(layers=1, output_layer=False)
    twin = drafting_head(head)
    hid, e_prev, u_prev, pos = _round()
    with torch.no_grad():
        (r32, g32), (r8, g8) = head.draft_pass(hid, e_prev, u_prev, pos), _pass(twin, hid, e_prev, u_prev, pos)
    assert r32 is None and r8 is None and _close(g8, g32, 0.05)


def test_the_numpy_norm_is_layer_norm_also_for_rows_of_tiny_spread():
    """_normalised is F.layer_norm before its weight and bias, eps included: a constant row gives zeros
    (not NaN), a row whose variance is about eps gives what layer_norm gives."""
    import numpy as np
    import torch.nn.functional as F

    from engine.models.ptp_int8 import _normalised

    assert _normalised(np.full((2, 8), 3.0, dtype=np.float32), 1e-5).tolist() == [[0.0] * 8] * 2
    x = (1 + 1e-3 * torch.randn(3, 16, generator=torch.Generator().manual_seed(0))).float()
    want = F.layer_norm(x, (16,), eps=1e-5)
    assert torch.allclose(torch.from_numpy(_normalised(x.numpy(), 1e-5)), want, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(torch.from_numpy(_normalised(x.numpy(), 0.0)), want, rtol=1e-4, atol=1e-4)
