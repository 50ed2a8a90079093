"""The CPU precision setting (INFILL_PRECISION / --precision, engine/loading/precision.py) and the bf16
path it turns on (engine/models/layers.py).

The rule that matters for every sampler: in bf16 a row is one function of its context, bit for bit,
whatever else the call carries (how many content rows, how many query rows, cached or not). Sequential
and speculative decoding then sample one law, exactly as in float32 (where rows agree to float32
rounding). Without the two guards (matmuls of at most BF16_ROWS rows, attention in float64) rows
of the bundled text model differed by up to 0.01 in total variation between a cached sequential run
and one call; these tests fail if either guard goes."""

from __future__ import annotations

import os

import pytest
import torch

from engine.cli import main as engine_main
from engine.errors import BadParameterError
from engine.loading import precision as prec
from engine.loading import registry
from engine.models import layers
from engine.models.asarm_core import AsArmLite, KVCache

needs_bf16 = pytest.mark.skipif(not prec.bf16_available(), reason="no AMX tiles or no oneDNN bfloat16 on this CPU")


# -- the setting --------------------------------------------------------------------------------

@pytest.mark.parametrize("amx, bf16, want", [(True, True, "bf16"), (False, True, "fp32"), (True, False, "fp32")])
def test_auto_picks_bf16_only_with_amx_and_onednn_bf16(amx, bf16, want, monkeypatch):
    monkeypatch.setattr(prec, "amx_present", lambda: amx)
    monkeypatch.setattr(prec, "bf16_supported", lambda: bf16)
    monkeypatch.setenv(prec.ENV, "")
    assert prec.resolve_precision() == want
    assert prec.resolve_precision(" AUTO ") == want


def test_explicit_settings_and_the_environment(monkeypatch):
    monkeypatch.setattr(prec, "bf16_available", lambda: True)
    monkeypatch.setenv(prec.ENV, "bf16")
    assert prec.resolve_precision() == "bf16"
    assert prec.resolve_precision("fp32") == "fp32"  # the argument wins over the environment


def test_unknown_precision_is_refused(monkeypatch):
    monkeypatch.setenv(prec.ENV, "half")
    with pytest.raises(BadParameterError, match="Unknown precision 'half'.*auto, fp32, bf16"):
        prec.resolve_precision()


@pytest.mark.parametrize("amx, bf16", [(False, True), (True, False)])
def test_bf16_without_amx_or_onednn_bf16_is_one_clear_error(amx, bf16, monkeypatch):
    monkeypatch.setattr(prec, "amx_present", lambda: amx)
    monkeypatch.setattr(prec, "bf16_supported", lambda: bf16)
    with pytest.raises(BadParameterError, match="no AMX tiles or torch's oneDNN no bfloat16.*use auto or fp32"):
        prec.resolve_precision("bf16")


def test_the_detections_read_the_cpu(monkeypatch):
    """AMX as the kernel reports it (/proc/cpuinfo's amx_tile flag); oneDNN's bfloat16 only with oneDNN."""
    try:
        flags = next(ln for ln in open("/proc/cpuinfo") if ln.startswith("flags")).split()
    except (OSError, StopIteration):
        pytest.skip("no /proc/cpuinfo flags here")
    assert prec.amx_present() == ("amx_tile" in flags)
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert prec.bf16_supported() is False and prec.bf16_available() is False


def test_the_flag_is_exported_for_what_loads_later(monkeypatch):
    monkeypatch.setenv(prec.ENV, "auto")
    assert prec.apply_precision_flag("fp32") == "fp32"
    assert os.environ[prec.ENV] == "fp32"
    assert prec.apply_precision_flag(None) == "fp32"  # no flag: the environment stands, untouched
    assert os.environ[prec.ENV] == "fp32"


@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_command_with_a_bad_precision_stops_with_one_line(how, capsys, monkeypatch):
    monkeypatch.setenv(prec.ENV, "fp32")  # restored after the test (the flag exports its value)
    argv = ["infill", "ab[MASK:2]c"]
    if how == "flag":
        argv += ["--precision", "fp16"]
    else:
        monkeypatch.setenv(prec.ENV, "fp16")
    assert engine_main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: Unknown precision 'fp16'") and "\n" not in err


def test_the_app_refuses_to_start_with_a_bad_precision(capsys, monkeypatch):
    import app.__main__ as app_main

    monkeypatch.setattr(app_main, "serve", lambda *a: pytest.fail("the app started anyway"))
    monkeypatch.setenv(prec.ENV, "fp32")
    with pytest.raises(SystemExit) as e:
        app_main.main(["--precision", "int4"])
    assert e.value.code == 2
    assert "Unknown precision 'int4'" in capsys.readouterr().err


def test_only_float32_models_on_the_cpu_take_bf16(tiny_asarm):
    m32 = AsArmLite.from_folder(tiny_asarm.path, torch.float32)
    assert prec.model_precision(m32, "cpu", "bf16") == "bf16"
    assert prec.model_precision(m32, "cuda", "bf16") == "fp32"
    assert prec.model_precision(tiny_asarm.model, "cpu", "bf16") == "fp32"  # the tiny model is float64
    assert prec.model_precision(torch.nn.Linear(2, 2), "cpu", "bf16") == "fp32"  # no bf16 path to set
    assert prec.model_precision(torch.nn.Identity(), "cpu", "bf16") == "fp32"  # no parameters at all


@needs_bf16
def test_the_loader_applies_the_setting_and_keys_its_cache_on_it(monkeypatch):
    monkeypatch.setenv(prec.ENV, "bf16")
    b = registry.load("text-asarm")
    monkeypatch.setenv(prec.ENV, "fp32")
    f = registry.load("text-asarm")
    assert (b.precision, f.precision) == ("bf16", "fp32")
    assert b.model is not f.model
    assert b.model.cpu_precision == "bf16" and {blk.cpu_precision for blk in b.model.blocks} == {"bf16"}
    assert f.model.cpu_precision == "fp32" and {blk.cpu_precision for blk in f.model.blocks} == {"fp32"}


# -- the bf16 path ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def text_pair():
    """The bundled text AS-ARM twice, as its own objects (the registry's cached one stays as it is):
    in float32 and in bf16."""
    folder = registry.resolve("text-asarm")
    f32 = AsArmLite.from_folder(folder, torch.float32)
    b16 = AsArmLite.from_folder(folder, torch.float32)
    b16.set_cpu_precision("bf16")
    return f32, b16


def _context(model, length: int = 120, prompt: int = 12, seed: int = 5):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, model.config.vocab_size, (1, length), generator=g)
    ids[0, 0] = model.config.bos_token_id
    pos = torch.arange(length)[None]
    return ids, pos, torch.clamp(pos - prompt + 1, min=0), prompt


def _rows_after(model, chunk: int, queries: torch.Tensor, length: int = 120) -> tuple[torch.Tensor, KVCache]:
    """Query rows answered after the context was committed `chunk` content rows a call (0: one
    uncached call over the whole context); with the cache it left (None uncached)."""
    ids, pos, rank, prompt = _context(model, length)
    lim = torch.full_like(queries, length - prompt + 1)
    one = torch.ones(1, 1, dtype=torch.long)
    with torch.inference_mode():
        if chunk == 0:
            return model(ids, pos, rank, queries, lim), None
        cache = KVCache()
        model(ids[:, :prompt], pos[:, :prompt], rank[:, :prompt], pos[:, :1], one, cache=cache)
        for at in range(prompt, length, chunk):
            sl = slice(at, min(at + chunk, length))
            model(ids[:, sl], pos[:, sl], rank[:, sl], pos[:, :1], one, cache=cache)
        return model(ids[:, :0], pos[:, :0], rank[:, :0], queries, lim, cache=cache), cache


@needs_bf16
def test_bf16_rows_are_one_function_of_their_context_bit_for_bit(text_pair):
    """Cached one row a call (cached sequential decoding), three a call (drafts), or the whole
    context in one call; 40 query rows in one call (past BF16_ROWS) or one at a time: the same bits."""
    _, b16 = text_pair
    queries = torch.arange(60, 100)[None]
    seq, seq_cache = _rows_after(b16, 1, queries)
    drafts, drafts_cache = _rows_after(b16, 3, queries)
    whole, _ = _rows_after(b16, 0, queries)
    assert torch.equal(seq, drafts) and torch.equal(seq, whole)
    for i in range(len(b16.blocks)):  # the cache itself: every decided token's K/V
        n = len(seq_cache)
        assert torch.equal(seq_cache.k[i][:, :, :n], drafts_cache.k[i][:, :, :n])
        assert torch.equal(seq_cache.v[i][:, :, :n], drafts_cache.v[i][:, :, :n])
    singly = torch.cat([_rows_after(b16, 1, queries[:, j : j + 1])[0] for j in range(0, 40, 13)], 1)
    assert torch.equal(singly, seq[:, ::13])


@needs_bf16
def test_bf16_is_a_nearby_model_not_float32(text_pair):
    """The bf16 path really runs (its rows are not float32's to rounding) and stays close to the
    float32 model: total variation below 0.05 on every row (about 0.01 measured)."""
    f32, b16 = text_pair
    queries = torch.arange(20, 60)[None]
    a, _ = _rows_after(f32, 0, queries)
    b, _ = _rows_after(b16, 0, queries)
    tv = 0.5 * (torch.softmax(a.double(), -1) - torch.softmax(b.double(), -1)).abs().sum(-1)
    assert float((a - b).abs().max()) > 1e-3
    assert float(tv.max()) < 0.05


@needs_bf16
def test_bf16_weights_follow_weight_changes_and_the_precision(tiny_asarm):
    """The packed weights are rebuilt when a weight changes in place or the precision changes: the
    same model switched back and forth computes what a freshly loaded one computes."""
    ids = torch.tensor([[1, 4, 5, 6]])
    pos = torch.arange(4)[None]
    rank = torch.tensor([[0, 1, 2, 3]])
    lim = torch.tensor([[1, 2, 3, 4]])

    def fresh(precision: str, scale: float) -> torch.Tensor:
        m = AsArmLite.from_folder(tiny_asarm.path, torch.float32)
        m.set_cpu_precision(precision)
        with torch.no_grad():
            m.blocks[0].mlp[0].weight.mul_(scale)
        with torch.inference_mode():
            return m(ids, pos, rank, pos, lim)

    m = AsArmLite.from_folder(tiny_asarm.path, torch.float32)
    with torch.inference_mode():
        f32 = m(ids, pos, rank, pos, lim)
        m.set_cpu_precision("bf16")
        b16 = m(ids, pos, rank, pos, lim)
        with torch.no_grad():
            m.blocks[0].mlp[0].weight.mul_(3.0)
        changed = m(ids, pos, rank, pos, lim)
        m.set_cpu_precision("fp32")
        back = m(ids, pos, rank, pos, lim)
    assert float((f32 - b16).abs().max()) > 1e-4  # bfloat16 rounding shows: the switch took effect
    assert torch.equal(b16, fresh("bf16", 1.0))
    assert torch.equal(changed, fresh("bf16", 3.0))
    assert float((back - fresh("fp32", 3.0)).abs().max()) < 1e-5


# -- the CPU weight copies and the bf16 pieces, one by one --------------------------------------

def test_the_cpu_copy_is_built_once_and_is_an_ordinary_tensor():
    """cpu_transposed keeps one [in, out] copy per owner (the same tuple until a weight changes),
    built as an ordinary tensor even inside inference_mode, so a later call whose input needs a
    gradient can save it for backward."""
    lin = torch.nn.Linear(16, 8, bias=False).eval().requires_grad_(False)
    with torch.inference_mode():
        first = layers.cpu_transposed(lin, ((lin.weight,),))
    assert first[0].shape == (16, 8) and torch.equal(first[0], lin.weight.t())
    assert layers.cpu_transposed(lin, ((lin.weight,),)) is first  # cached, not rebuilt
    x = torch.randn(3, 16, requires_grad=True)
    torch.mm(x, first[0]).sum().backward()  # an inference tensor would refuse to be saved
    assert x.grad is not None


@needs_bf16
def test_packed_bf16_rows_come_back_in_order_past_the_chunk_size():
    """_rows_mm with a packed weight: 70 rows (three chunks of at most BF16_ROWS) give each row's bits
    as that row alone gives them, in order, as float32, the bias added in float32."""
    w, bias = torch.randn(8, 16), torch.randn(8)
    packed = layers.cpu_transposed(torch.nn.Linear(16, 8).eval(), ((w,),), "bf16")[0]
    x = torch.randn(1, 70, 16)
    y = layers._rows_mm(x, packed, bias)
    alone = torch.cat([layers._rows_mm(x[:, i : i + 1], packed, bias) for i in range(70)], 1)
    assert y.shape == (1, 70, 8) and y.dtype == torch.float32 and torch.equal(y, alone)
    exact = x[0].bfloat16().float() @ w.bfloat16().float().t() + bias
    assert float((y[0] - exact).abs().max()) < 0.1  # the product of the rounded rows, rounded once more
    assert layers._rows_mm(x[:, :0], packed).shape == (1, 0, 8)  # a call without content rows


def test_float64_attention_reads_a_boolean_mask_as_the_additive_one():
    q, k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 4)
    allowed = torch.rand(1, 3, 5) > 0.4
    allowed[..., 0] = True  # every row sees a key
    additive = torch.zeros(1, 3, 5).masked_fill(~allowed, float("-inf"))
    assert torch.equal(layers._attention64(q, k, v, allowed), layers._attention64(q, k, v, additive))
