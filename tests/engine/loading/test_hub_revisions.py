"""`NAME@REVISION` Hub checkpoints, a tokenizer borrowed from another id, and the ASSD paper's code
mapping, loaded offline from a Hugging Face cache laid out as the Hub lays it out.

No network: HF_HUB_OFFLINE=1, HF_HOME and HF_HUB_CACHE point at a tmp dir holding
models--someone--ASARM/refs/{nlp,code} -> snapshots/<hash>/ (a tiny random XLNetLMHeadModel, no
tokenizer, as the paper's repository ships it) and models--xlnet--xlnet-base-cased (a tiny
XLNet-style tokenizer only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import XLNetConfig, XLNetLMHeadModel, XLNetTokenizer

from engine.api import infill
from engine.errors import ModelNotFoundError
from engine.inputs.tokenization import Codec
from engine.loading import hub, registry
from engine.loading import loaded_model as model_loading

ROOT = Path(__file__).resolve().parents[3]
SPECIALS = ["<unk>", "<s>", "</s>", "<cls>", "<sep>", "<pad>", "<mask>", "<eod>", "<eop>"]
PIECES = ["▁", "a", "b", "c", "▁a", "▁b", "▁c", "▁def", "▁return", "(", ")", ":", "x", "▁x", "f", "▁f"]


def xlnet_style_tokenizer() -> XLNetTokenizer:
    """XLNet's special tokens and sentencepiece-style pieces (Unigram + Metaspace), tiny."""
    return standin_xlnet_tokenizer([(w, -1.0 - 0.1 * i) for i, w in enumerate(PIECES)])


def standin_xlnet_tokenizer(pieces: list[tuple[str, float]]) -> XLNetTokenizer:
    """An XLNet tokenizer without its sentencepiece model (none can be had offline): XLNet's special
    tokens, then `pieces` (piece, log-probability) in a Unigram model with the Metaspace word marks."""
    vocab = [(s, 0.0) for s in SPECIALS] + pieces
    tok = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always")
    return XLNetTokenizer(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                          cls_token="<cls>", sep_token="<sep>", pad_token="<pad>", mask_token="<mask>",
                          additional_special_tokens=["<eop>", "<eod>"])


def _snapshot(cache: Path, repo: str, revision: str, commit: str) -> Path:
    """The Hub cache's layout: refs/<revision> holds a commit hash, snapshots/<hash>/ the files."""
    base = cache / ("models--" + repo.replace("/", "--"))
    (base / "refs").mkdir(parents=True, exist_ok=True)
    (base / "refs" / revision).write_text(commit)
    snap = base / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    return snap


def build_cache(cache: Path) -> Path:
    """someone/ASARM at revisions nlp and code (different random weights, no tokenizer) and
    xlnet/xlnet-base-cased (tokenizer and config only)."""
    tok = xlnet_style_tokenizer()
    for i, rev in enumerate(("nlp", "code")):
        torch.manual_seed(i)
        cfg = XLNetConfig(vocab_size=len(tok), d_model=16, n_layer=2, n_head=2, d_inner=32, dropout=0.0)
        XLNetLMHeadModel(cfg).save_pretrained(_snapshot(cache, "someone/ASARM", rev, f"{i + 1:040x}"))
    own = _snapshot(cache, "someone/ASARM", "withtok", "e" * 40)  # a revision that ships its own tokenizer
    XLNetLMHeadModel(XLNetConfig(vocab_size=len(tok), d_model=16, n_layer=1, n_head=2, d_inner=32)).save_pretrained(own)
    tok.save_pretrained(own)
    snap = _snapshot(cache, "xlnet/xlnet-base-cased", "main", "f" * 40)
    tok.save_pretrained(snap)
    XLNetConfig(vocab_size=len(tok), d_model=16, n_layer=1, n_head=2, d_inner=32).to_json_file(snap / "config.json")
    return cache


@pytest.fixture(scope="module")
def hub_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("hf_home")
    build_cache(home / "hub")
    return home


@pytest.fixture
def offline_hub(hub_home, monkeypatch):
    """The process reads the tmp cache only: env and huggingface_hub's import-time constant."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(hub_home))
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_home / "hub"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(hub_home / "hub"))
    monkeypatch.setenv("INFILL_MODEL_IDS", "")
    monkeypatch.delenv("INFILL_HUB_OPTIONS", raising=False)
    hub._OPTIONS.clear()
    for f in (hub.hub_folder, hub.hub_config, model_loading._load_folder):
        f.cache_clear()
    yield hub_home / "hub"
    hub._OPTIONS.clear()
    for f in (hub.hub_folder, hub.hub_config, model_loading._load_folder):
        f.cache_clear()


def test_name_at_revision_loads_that_revision_with_the_family_tokenizer(offline_hub):
    nlp, code = registry.load("someone/ASARM@nlp"), registry.load("someone/ASARM@code")
    assert (nlp.name, nlp.hub_id, nlp.kind, nlp.model_type) == ("someone/ASARM@nlp",) * 2 + ("asarm", "xlnet")
    assert f"{1:040x}" in str(nlp.model.name_or_path) and f"{2:040x}" in str(code.model.name_or_path)
    w = "transformer.word_embedding.weight"
    assert not torch.equal(nlp.model.state_dict()[w], code.model.state_dict()[w]), "one revision loaded twice"
    tok_snap = offline_hub / "models--xlnet--xlnet-base-cased" / "snapshots" / ("f" * 40)
    assert nlp.tokenizer_from == str(tok_snap), "the checkpoint has no tokenizer: xlnet/xlnet-base-cased's"
    assert nlp.codec.mask_id == SPECIALS.index("<mask>") and nlp.codec.encode("a b") == [13, 14]
    r = infill("a [MASK:3] c", model="someone/ASARM@nlp", sampler="assd", k=2, seed=0)
    assert r.model == "someone/ASARM@nlp" and r.masked_tokens == 3 and r.calls >= 1


def test_the_code_revision_maps_whitespace_as_the_paper_does(offline_hub):
    nlp, code = registry.load("someone/ASARM@nlp"), registry.load("someone/ASARM@code")
    assert (nlp.code_map, code.code_map) == (False, True), "on by default for */ASARM@code only"
    assert (nlp.domain, code.domain) == ("text", "code")
    ids = code.codec.encode("def f(x):\n\treturn x")
    cls, sep = SPECIALS.index("<cls>"), SPECIALS.index("<sep>")
    assert ids[ids.index(cls) + 1] == sep and code.codec.decode(ids) == "def f(x):\n\treturn x"
    # the authors' order: two spaces before three, so three spaces read as two and <pad> never occurs
    assert code.codec.decode(code.codec.encode("a\n    b  c")) == "a\n    b  c"
    assert code.codec.decode(code.codec.encode("a\n   b   c")) == "a\n  b  c"
    unk = SPECIALS.index("<unk>")
    assert code.codec.encode("a   b")[1] == unk and code.codec.encode("a  b")[1] == unk
    assert code.codec.encode("\n    return") == [cls, unk, unk, len(SPECIALS) + PIECES.index("▁return")]
    for tid in (cls, sep, 0, SPECIALS.index("<pad>")):  # whitespace now: samplable, not masked away
        assert tid not in code.codec.special_ids and tid in nlp.codec.special_ids
    # without the mapping XLNet's tokenizer splits on whitespace and spells none of it: why the paper maps it
    assert nlp.codec.decode(nlp.codec.encode("a\n\tb  c")) == "a b c"
    r = infill("def f(x):\n\t[MASK:3]", model="someone/ASARM@code", sampler="sequential", seed=1)
    assert r.text.startswith("def f(x):\n\t")


def test_options_from_the_environment_and_the_cli_override_the_defaults(offline_hub, monkeypatch, tmp_path):
    monkeypatch.setenv("INFILL_HUB_OPTIONS", json.dumps({"someone/ASARM@code": {"code_map": False}}))
    assert registry.load("someone/ASARM@code").code_map is False
    tok = xlnet_style_tokenizer()
    tok.save_pretrained(tmp_path / "mytok")
    hub.set_hub_options("someone/ASARM@nlp", tokenizer=str(tmp_path / "mytok"), code_map=True)
    lm = registry.load("someone/ASARM@nlp")
    assert lm.tokenizer_from == str((tmp_path / "mytok").resolve()) and lm.code_map
    from engine.cli import main as engine_main

    assert engine_main(["infill", "a [MASK] c", "--model", "someone/ASARM@code", "--code-map", "--json"]) == 0
    assert registry.load("someone/ASARM@code").code_map is True, "--code-map overrides the environment"
    assert registry.load("someone/ASARM@withtok").tokenizer_from is None, "its own tokenizer by default"
    hub.set_hub_options("someone/ASARM@withtok", tokenizer="xlnet/xlnet-base-cased")
    assert "models--xlnet--xlnet-base-cased" in registry.load("someone/ASARM@withtok").tokenizer_from
    monkeypatch.setenv("INFILL_HUB_OPTIONS", "{not json")
    with pytest.raises(ModelNotFoundError, match="INFILL_HUB_OPTIONS is not JSON"):
        registry.load("someone/ASARM@code")


def test_the_special_token_rule_is_a_per_model_option_named_on_the_card(offline_hub, monkeypatch):
    """Default on (every special id banned); off through INFILL_HUB_OPTIONS, set_hub_options or
    --no-exclude-special: only <mask> is removed (the ASSD authors' law); the card says which."""
    from app.views.cards import card_markdown
    from engine.api import make_oracle
    from engine.inputs.masking import parse_masked_text

    monkeypatch.setenv("INFILL_MODEL_IDS", "someone/ASARM@nlp")
    lm = registry.load("someone/ASARM@nlp")
    mi = parse_masked_text("a [MASK:2] c", lm.codec, max_tokens=64)
    assert lm.exclude_special and int(make_oracle(lm, mi, False).banned.sum()) == len(SPECIALS)
    card = card_markdown("someone/ASARM@nlp")
    assert "special tokens excluded from fills on" in card and "fed without &lt;s&gt;" in card
    monkeypatch.setenv("INFILL_HUB_OPTIONS", json.dumps({"someone/ASARM@nlp": {"exclude_special": False}}))
    off = registry.load("someone/ASARM@nlp")
    banned = make_oracle(off, mi, True).banned
    assert not off.exclude_special and torch.nonzero(banned).flatten().tolist() == [SPECIALS.index("<mask>")]
    card = card_markdown("someone/ASARM@nlp")
    assert "off: only &lt;mask&gt; is removed" in card and "<mask>" not in card, "named, and escaped"
    monkeypatch.delenv("INFILL_HUB_OPTIONS")
    from engine.cli import main as engine_main

    assert engine_main(["infill", "a [MASK] c", "--model", "someone/ASARM@nlp", "--no-exclude-special", "--json"]) == 0
    assert registry.load("someone/ASARM@nlp").exclude_special is False
    hub.set_hub_options("someone/ASARM@nlp", exclude_special=True)
    assert registry.load("someone/ASARM@nlp").exclude_special is True


def test_revisions_in_the_operator_list_and_the_offline_message(offline_hub, monkeypatch):
    monkeypatch.setenv("INFILL_MODEL_IDS", "someone/ASARM@nlp, someone/ASARM@code")
    rows = {r["name"]: r for r in registry.available()}
    assert rows["someone/ASARM@nlp"]["kind"] == rows["someone/ASARM@code"]["kind"] == "asarm"
    assert (rows["someone/ASARM@nlp"]["domain"], rows["someone/ASARM@code"]["domain"]) == ("text", "code")
    from app.choices import list_models

    assert "someone/ASARM@nlp" in list_models("text", "asarm") and "someone/ASARM@code" in list_models("code", "asarm")
    assert registry.resolve("someone/ASARM@code", allow_paths=False) == "someone/ASARM@code"
    with pytest.raises(ModelNotFoundError, match="No model named"):
        registry.resolve("someone/ASARM@other", allow_paths=False)  # the app: listed names only
    with pytest.raises(ModelNotFoundError, match=r"hf download someone/ASARM --revision v9 --local-dir DIR"):
        registry.load("someone/ASARM@v9")
    with pytest.raises(ModelNotFoundError, match="No model named"):
        registry.load("someone/ASARM@../x")


def test_the_cli_loads_name_at_revision_offline_in_a_fresh_process(hub_home):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(hub_home), "HF_HUB_CACHE": str(hub_home / "hub"),
           "INFILL_MODEL_IDS": "", "PYTHONPATH": str(ROOT)}
    env.pop("INFILL_HUB_OPTIONS", None)
    p = subprocess.run([sys.executable, "-m", "engine", "infill", "a [MASK:2] c", "--model", "someone/ASARM@nlp",
                        "--sampler", "assd", "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["model"] == "someone/ASARM@nlp" and out["masked_tokens"] == 2


def test_codec_without_a_mapping_is_unchanged():
    tok = xlnet_style_tokenizer()
    plain, mapped = Codec(tok), Codec(tok, whitespace={"\n": "<cls>"})
    assert plain.encode("a b") == mapped.encode("a b") and plain.whitespace == {}
    assert SPECIALS.index("<cls>") in plain.special_ids and SPECIALS.index("<cls>") not in mapped.special_ids
