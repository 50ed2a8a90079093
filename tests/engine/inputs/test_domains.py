"""One home for the domains (issue 23): engine/inputs/domains.py. Every bundled model, fetcher, tokenizer and
quality measure is keyed off the registry, and a new entry reaches the masking rule, the CLI, the
app's input reading and the lab's document joining without touching them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.api import parse_for
from engine.inputs import domains
from engine.inputs.domains import CORPORA, DOMAINS, Domain, studio_domains
from engine.inputs.tokenization import Codec, char_tokenizer

ROOT = Path(__file__).resolve().parents[3]


def test_every_bundled_model_belongs_to_its_domain_and_every_listed_one_is_bundled():
    bundled = {p.name for p in (ROOT / "assets" / "models").iterdir() if (p / "config.json").is_file()}
    listed = [m for d in DOMAINS.values() for m in d.models]
    assert len(listed) == len(set(listed))
    assert set(listed) == bundled, f"not in the registry: {bundled - set(listed)}; not bundled: {set(listed) - bundled}"
    for d in DOMAINS.values():
        assert all(m.startswith(f"{d.name}-") for m in d.models), d.name


def test_every_domain_has_a_fetcher_a_tokenizer_and_a_quality_measure():
    from engine.loading.checkpoint import DOMAINS as DECLARABLE
    from lab.corpus_clean import PROTEIN_ALPHABET as CLEAN_ALPHABET
    from lab.data import FETCHERS, TRAIN_DOMAINS
    from lab.evaluate import BITS_PER_CHAR, DATA_TEXT, QUALITY

    assert CLEAN_ALPHABET == DOMAINS["protein"].alphabet  # corpus_clean keeps a copy (it must not import torch)
    for name, d in DOMAINS.items():
        assert name in FETCHERS and name in TRAIN_DOMAINS and name in DECLARABLE, name
        assert DATA_TEXT[name] == d.data
        assert d.tokenizer in ("bpe", "chars"), name
        assert (d.bpe_vocab > 0) if d.tokenizer == "bpe" else len(set(d.alphabet)) == len(d.alphabet) > 0, name
        assert d.quality in ("", BITS_PER_CHAR) or d.quality in QUALITY, name
        assert (ROOT / "assets" / "tokenizers" / name / "tokenizer.json").is_file(), name
        if d.tokenizer == "chars":
            codec = Codec.load(ROOT / "assets" / "tokenizers" / name)
            assert codec.decode(codec.encode(d.alphabet)) == d.alphabet, name
    for corpus, domain in CORPORA.items():
        assert domain in DOMAINS and corpus in FETCHERS and corpus in DECLARABLE and corpus in DATA_TEXT


def test_studio_domains_have_examples_with_masks():
    assert {"text", "code", "protein"} <= set(studio_domains()) and "chars" not in studio_domains()
    for name in studio_domains():
        ex = DOMAINS[name].examples
        assert ex and all("[MASK" in e for e in ex), name
        assert ex[0].count("[MASK") >= 2, name  # the first run shows rounds across spans


@pytest.fixture
def dna(monkeypatch):
    """A DNA domain added the way a contributor adds one: a registry entry (nothing else)."""
    entry = Domain(name="dna", about="DNA", studio=True, span=(6, ""), tokenizer="chars", separator=None,
                   quality="", data="test data", models=(), alphabet="ACGT", fluent_ppl=3,
                   normalise=lambda t: (t.upper(), "upper-cased" if t != t.upper() else ""),
                   examples=("ACGT[MASK]ACGT[MASK:2]",))
    monkeypatch.setitem(DOMAINS, "dna", entry)
    return entry


def test_a_new_entry_reaches_masking_cli_app_and_lab(dna):
    lm = SimpleNamespace(codec=Codec(char_tokenizer("ACGT")), max_tokens=64, domain="dna")
    assert len(parse_for("AC[MASK]GT", lm).masked) == 6  # its bare [MASK]
    assert len(parse_for("AC[MASK]GT", SimpleNamespace(**{**vars(lm), "domain": "protein"})).masked) == 10
    from engine.cli import build_parser

    a = build_parser().parse_args(["infill", "ACG[MASK]", "--domain", "dna"])
    assert a.domain == "dna"
    from app.run.inputs import mask_units, normalize

    assert normalize("dna", "acg[MASK]") == ("ACG[MASK]", "upper-cased")
    assert mask_units("dna", lm.codec).startswith("[MASK] = 6 tokens")
    from app.views.cards import quality_verdict

    assert "perplexity is 4" in quality_verdict({"domain": "dna", "metrics": {"ppl_left_to_right": 4.0}})
    assert quality_verdict({"domain": "dna", "metrics": {"ppl_left_to_right": 2.5}}) == ""
    from lab.workloads import separator_ids

    assert separator_ids("dna", lm.codec) == []  # no separator: each sequence is a window of its own


def test_separators_and_line_masks_come_from_the_registry():
    from lab.workloads import separator

    assert separator("text") == separator("code") == "\n\n" and separator("protein") is None
    assert separator("chars") == " " and separator("modern") == separator("text")
    assert domains.line_masks("code") and not domains.line_masks("text") and not domains.line_masks(None)
    assert domains.default_span("text") == (1, "w") and domains.default_span("nope") == (8, "")
