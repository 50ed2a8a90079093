"""The hybrid (self-speculative masked diffusion) model, its backbone adapter, and the MDM sampler."""

from __future__ import annotations

import itertools
import math
import types
from pathlib import Path

import pytest
import torch

from engine.models.hybrid import HybridConfig, HybridModel
from engine.samplers.base import Recorder
from engine.samplers.hybrid_passes import CallCounter
from engine.samplers.mdm import mdm
from engine.trace import StepKind
from tests.support.tiny import masked_input, tiny_codec


def tiny_hybrid(seed: int = 0, length: int = 6, codec=None, scale: float = 0.6) -> HybridModel:
    """A random float64 hybrid with large weights (conditionals differ a lot)."""
    torch.manual_seed(seed)
    codec = codec or tiny_codec()
    cfg = HybridConfig(vocab_size=codec.vocab_size, hidden_size=16, num_layers=2, causal_layers=1, num_heads=2,
                       intermediate_size=32, max_positions=length + 1, domain="text",
                       bos_token_id=codec.bos_id, pad_token_id=codec.pad_id, mask_token_id=codec.mask_id,
                       special_token_ids=codec.special_ids)
    model = HybridModel(cfg).to(torch.float64)
    with torch.no_grad():
        for prm in model.parameters():
            if prm.dim() > 1:
                prm.normal_(0, scale)
    return model.eval()


def save_tiny_hybrid(folder: Path, seed: int = 0, length: int = 6, codec=None) -> Path:
    codec = codec or tiny_codec()
    tiny_hybrid(seed, length, codec).save_pretrained(folder)
    codec.hf.save_pretrained(folder)
    return folder


def test_training_loss_and_train_entry_config():
    codec = tiny_codec()
    a = types.SimpleNamespace(hidden=16, layers=3, heads=2, ffn=32, causal_layers=1, seq_len=8, domain="text")
    cfg = HybridConfig.for_training(a, codec)
    assert (cfg.num_layers, cfg.causal_layers, cfg.max_positions) == (2, 1, 9)
    assert math.isclose(cfg.nc_share + cfg.causal_share, 1.0) and math.isclose(cfg.nc_share, 2 / 3)
    model = HybridModel(cfg)
    ids = torch.randint(4, codec.vocab_size, (4, 9))
    ids[:, 0] = codec.bos_id
    loss = model.training_loss(ids, 0.5, torch.Generator().manual_seed(0))
    assert torch.isfinite(loss) and loss.item() > 0
    loss.backward()
    assert model.in_proj.weight.grad is not None and model.nc.embed.weight.grad is not None


def test_causal_track_is_causal_and_first_is_noncausal(tmp_path):
    model = tiny_hybrid()
    ids = torch.tensor([[1, 4, 2, 2, 2, 5, 2]])
    h, nc_logits = model.noncausal(ids)
    order = torch.tensor([[3, 6, 2, 4]])
    toks = torch.tensor([[4, 5, 6, 4]])
    out = model.causal(h, order, toks)
    assert out.shape == (1, 3, model.config.vocab_size)
    toks2 = toks.clone()
    toks2[0, 2:] = torch.tensor([5, 5])
    out2 = model.causal(h, order, toks2)
    assert torch.equal(out[0, :2], out2[0, :2]) and not torch.equal(out[0, 2], out2[0, 2])
    # save / load through the Auto classes
    save_tiny_hybrid(tmp_path / "h")
    from transformers import AutoModel

    back = AutoModel.from_pretrained(str(tmp_path / "h")).to(torch.float64)
    assert isinstance(back, HybridModel)
    assert torch.allclose(back.noncausal(ids)[1], nc_logits)


def _run_mdm(model, mi, steps, seed=0):
    counter = CallCounter()
    rec = Recorder(lambda t: "", counter)
    return list(mdm(model, mi, rec, torch.Generator().manual_seed(seed), 1.0, steps, counter)), counter


@pytest.mark.parametrize("steps", [1, 3, 12])
def test_mdm_reveals_each_position_once_and_keeps_prompt(steps):
    codec = tiny_codec()
    model = tiny_hybrid()
    mi = masked_input(codec, {0: "a", 3: "c"}, 6)
    trace, counter = _run_mdm(model, mi, steps)
    revealed = [p for s in trace if s.kind == StepKind.REVEAL for p in s.positions]
    assert sorted(revealed) == sorted(mi.masked) and len(set(revealed)) == len(revealed)
    assert not set(revealed) & set(mi.visible)
    passes = [s for s in trace if s.kind == StepKind.MDM_PASS]
    assert len(passes) == steps
    share = model.config.nc_share
    assert math.isclose(trace[-1].calls, steps * share)
    productive = sum(1 for s in trace if s.kind == StepKind.REVEAL)
    assert math.isclose(counter.best, productive * share) and counter.best <= counter.calls
    from engine.trace import trace_counts

    counts = trace_counts(trace)  # what results, JSON and the bench report: derived from the trace alone
    assert math.isclose(counts["calls_best"], counter.best) and math.isclose(counts["calls"], counter.calls)
    assert "best-case" in trace[-1].note


def test_mdm_and_self_spec_through_the_api(tmp_path, monkeypatch):
    from engine import api

    monkeypatch.setenv("INFILL_MODEL_DIRS", str(tmp_path))
    folder = save_tiny_hybrid(tmp_path / "tiny-hybrid")
    for sampler in ("mdm", "self-spec"):
        r = api.infill("ab[MASK:3]c", model=str(folder), sampler=sampler, steps=2, dtau=0.5, inner=2, seed=3)
        assert r.text.startswith("ab") and r.text.endswith("c") and len(r.text) == 6
        assert r.masked_tokens == 3 and r.calls > 0 and r.log_prob is None
        assert set(r.text) <= set("abc")
    # the likelihood of a stored self-spec run, through engine.score
    r = api.infill("ab[MASK:3]c", model=str(folder), sampler="self-spec", dtau=1.0, window="linear", inner=2)
    monkeypatch.delenv("INFILL_MODEL_DIRS")  # the result knows its model's folder: no registry needed
    lp = api.score(result=r, sampler="self-spec")
    from engine.loading.registry import load
    from engine.samplers.selfspec_likelihood import log_prob_given_order, order_from_trace

    lm = load(str(folder))
    want = log_prob_given_order(lm.model, r.masked_input, r.tokens, order_from_trace(r.trace), temperature=1.0,
                                dtau=1.0, window="linear", inner=2)
    assert lp < 0 and math.isclose(lp, want, rel_tol=1e-12)
    # the score must be conditional on the run's own decode order: every other order gives another
    # number here, so a score that lost the order (or averaged over orders) would fail
    order = order_from_trace(r.trace)
    assert sorted(order) == r.masked_input.masked
    others = [log_prob_given_order(lm.model, r.masked_input, r.tokens, list(o), temperature=1.0, dtau=1.0,
                                   window="linear", inner=2) for o in itertools.permutations(order) if list(o) != order]
    assert len(others) == 5 and all(not math.isclose(lp, o, rel_tol=1e-9) for o in others), (lp, others)
    monkeypatch.setenv("INFILL_MODEL_DIRS", str(tmp_path))
    with pytest.raises(Exception, match="AS-ARM|hybrid"):
        api.infill("ab[MASK:3]c", model=str(folder), sampler="assd")
    # diffusion-drafted ASSD: an AS-ARM verifies a hybrid's drafts (same tokenizer required)
    from engine.errors import IncompatibleModelsError
    from engine.inputs.tokenization import Codec, char_tokenizer
    from tests.support.tiny import save_tiny_asarm

    asarm = save_tiny_asarm(tmp_path / "tiny-asarm")
    r = api.infill("ab[MASK:3]c", model=str(asarm), sampler="assd-diffusion", draft_model=str(folder), steps=2, k=3)
    assert r.masked_tokens == 3 and r.text.startswith("ab") and r.calls > 0
    assert any(s.kind == StepKind.MDM_PASS for s in r.trace)
    other = save_tiny_hybrid(tmp_path / "tiny-hybrid-abcd", codec=Codec(char_tokenizer("abcd")))
    with pytest.raises(IncompatibleModelsError, match="same tokenizer"):
        api.infill("ab[MASK:3]c", model=str(asarm), sampler="assd-diffusion", draft_model=str(other))


# ---------------------------------------------------------------- pretrained backbone adapter
def _tiny_mlm(kind: str):
    from transformers import BertConfig, BertForMaskedLM, EsmConfig, EsmForMaskedLM, RobertaConfig, RobertaForMaskedLM

    common = dict(vocab_size=12, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                  hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)
    if kind == "bert":
        return BertForMaskedLM(BertConfig(max_position_embeddings=16, **common))
    if kind == "roberta":
        return RobertaForMaskedLM(RobertaConfig(max_position_embeddings=18, pad_token_id=1, bos_token_id=0,
                                                **common))
    return EsmForMaskedLM(EsmConfig(max_position_embeddings=16, pad_token_id=1, mask_token_id=11,
                                    position_embedding_type="rotary", **common))


@pytest.mark.parametrize("kind", ["bert", "roberta", "esm"])
def test_backbone_adapter_is_frozen(tmp_path, kind):
    torch.manual_seed(0)
    _tiny_mlm(kind).save_pretrained(tmp_path / kind)
    model = HybridModel.from_backbone(tmp_path / kind, hidden_size=16, num_heads=2, intermediate_size=32,
                                      bos_token_id=0, mask_token_id=3, special_token_ids=[0, 1, 2, 3])
    before = {k: v.clone() for k, v in model.nc.state_dict().items()}
    causal_before = model.in_proj.weight.clone()
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert trainable and all(not p.requires_grad for p in model.nc.parameters())
    opt = torch.optim.AdamW(trainable, lr=1e-2, weight_decay=0.01)
    model.train()
    ids = torch.randint(4, 12, (3, 9))
    ids[:, 0] = 0
    loss = model.training_loss(ids, 0.5, torch.Generator().manual_seed(0))
    loss.backward()
    opt.step()
    after = model.nc.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert not torch.equal(causal_before, model.in_proj.weight)
    assert not model.nc.mlm.training  # dropout of the frozen backbone stays off
    # the pretrained backbone's own MLM logits are the draft head
    from transformers import AutoModelForMaskedLM

    ref = AutoModelForMaskedLM.from_pretrained(str(tmp_path / kind)).eval()
    with torch.no_grad():
        assert torch.allclose(model.noncausal(ids)[1], ref(input_ids=ids).logits, atol=1e-5)
    # a saved hybrid with a backbone round-trips (backbone weights included)
    model.save_pretrained(tmp_path / "hb")
    back = HybridModel.from_pretrained(str(tmp_path / "hb")).eval()
    with torch.no_grad():
        h, _ = model.noncausal(ids)
        h2, _ = back.noncausal(ids)
        order = torch.tensor([[1, 3, 2, 5]] * 3)
        assert torch.allclose(h, h2, atol=1e-6)
        assert torch.allclose(model.causal(h, order, ids[:, :4]), back.causal(h2, order, ids[:, :4]), atol=1e-5)


def test_train_entry_point_with_a_frozen_backbone(tmp_path, monkeypatch):
    """`python -m engine train --kind hybrid --backbone DIR`: the real training loop on a tiny BERT
    with its own tokenizer; the saved hybrid keeps the backbone's weights and fills a span."""
    import json as _json

    from transformers import BertConfig, BertForMaskedLM

    from engine import api
    from engine.inputs.tokenization import PROTEIN_ALPHABET, Codec, char_tokenizer
    from engine.loading.registry import load
    from lab import train

    codec = Codec(char_tokenizer(PROTEIN_ALPHABET))
    torch.manual_seed(0)
    mlm = BertForMaskedLM(BertConfig(vocab_size=codec.vocab_size, hidden_size=16, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=32, max_position_embeddings=40))
    mlm.save_pretrained(tmp_path / "bb")
    codec.hf.save_pretrained(tmp_path / "bb")
    corpus = tmp_path / "data" / "corpora" / "protein"
    corpus.mkdir(parents=True)
    rng = __import__("random").Random(0)
    for split in ("train", "valid"):
        rows = ["".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(60)) for _ in range(20)]
        (corpus / f"{split}.jsonl").write_text("".join(_json.dumps({"id": str(i), "text": t}) + "\n"
                                                       for i, t in enumerate(rows)))
    monkeypatch.setenv("INFILL_DATA_DIR", str(tmp_path / "data"))
    out = tmp_path / "bb-hybrid"
    assert train.cli(["--kind", "hybrid", "--domain", "protein", "--backbone", str(tmp_path / "bb"), "--out", str(out),
                      "--hidden", "16", "--heads", "2", "--ffn", "32", "--seq-len", "16", "--batch", "2",
                      "--steps", "3", "--minutes", "2"]) == 0
    assert _json.loads((out / "train_state.json").read_text())["steps"] == 3
    lm = load(str(out))
    saved = lm.model.nc.mlm.state_dict()
    shared = [k for k in mlm.state_dict() if k in saved]
    assert len(shared) >= 20
    for k in shared:  # frozen through the whole loop (bundled weights are bfloat16)
        assert torch.equal(saved[k], mlm.state_dict()[k].to(torch.bfloat16).float()), k
    r = api.infill("MKT[MASK:5]LLV", model=str(out), sampler="self-spec", domain="protein", seed=0)
    assert r.text.startswith("MKT") and r.text.endswith("LLV") and len(r.text) == 11
    with pytest.raises(SystemExit):  # an AS-ARM cannot take a backbone
        train.cli(["--kind", "asarm", "--domain", "protein", "--backbone", str(tmp_path / "bb"), "--out", str(out)])


@pytest.mark.parametrize("sampler", ["mdm", "self-spec"])
def test_same_seed_same_trace(tmp_path, sampler):
    from engine.api import InfillRun

    folder = save_tiny_hybrid(tmp_path / "tiny-hybrid")
    outs = set()
    for seed in range(4):
        traces = []
        for _ in range(2):
            run = InfillRun("ab[MASK:3]c", model=str(folder), sampler=sampler, steps=3, dtau=0.5, seed=seed)
            traces.append([(s.kind, s.positions, s.tokens, s.p, s.q, s.calls) for s in run.stream()])
        assert traces[0] == traces[1]
        outs.add(tuple(t for s in traces[0] for t in s[2]))
    assert len(outs) > 1, "different seeds should give different samples"


def _mdm_law(model, mi, steps: int) -> dict[tuple[int, ...], float]:
    """MDM's exact output law, enumerated: at each step of the grid a uniformly random subset of
    the schedule's size is revealed, each of its tokens drawn from the factorized prediction."""
    import itertools

    from engine.samplers.hybrid_passes import cosine_remaining, model_ids, nc_pass

    symbols = list(range(4, model.config.vocab_size))
    remaining = cosine_remaining(len(mi.masked), steps)
    out: dict[tuple[int, ...], float] = {}

    def walk(s: int, ids: list[int], unrevealed: list[int], prob: float) -> None:
        if s > steps:
            key = tuple(ids[p + 1] for p in mi.masked)
            out[key] = out.get(key, 0.0) + prob
            return
        n = remaining[s - 1] - remaining[s]
        if not n:
            return walk(s + 1, ids, unrevealed, prob)
        probs = torch.softmax(nc_pass(model, ids)[1], -1)
        subsets = list(itertools.combinations(unrevealed, n))
        for sub in subsets:
            for toks in itertools.product(symbols, repeat=n):
                pr = prob / len(subsets)
                new = list(ids)
                for pos, t in zip(sub, toks):
                    pr *= float(probs[pos + 1, t])
                    new[pos + 1] = t
                walk(s + 1, new, [p for p in unrevealed if p not in sub], pr)

    walk(1, model_ids(model, mi.tokens), list(mi.masked), 1.0)
    return out


@pytest.mark.parametrize("steps", [2, 3])
def test_mdm_matches_its_exact_law(steps):
    """Sampling only the revealed positions keeps MDM's law (issue 13): a G-test against the law
    enumerated from the definition (reveal a uniform subset, draw its tokens factorized)."""
    from tests.support.tiny import g_test

    codec = tiny_codec()
    model = tiny_hybrid()
    mi = masked_input(codec, {1: "b"}, 4)  # 3 masked positions: 27 outcomes
    law = _mdm_law(model, mi, steps)
    assert abs(sum(law.values()) - 1) < 1e-9
    counts: dict[tuple[int, ...], int] = {}
    n = 1500
    for seed in range(n):
        trace, _ = _run_mdm(model, mi, steps, seed)
        got = {p: t for s in trace if s.kind == StepKind.REVEAL for p, t in zip(s.positions, s.tokens)}
        key = tuple(got[p] for p in mi.masked)
        counts[key] = counts.get(key, 0) + 1
    assert g_test(counts, law, n) > 1e-3
