"""The committed checkpoints load offline and fill a masked span in their domain; the bundled
tokenizers round-trip text and code exactly."""

from __future__ import annotations

import pytest

import engine
from engine.inputs.tokenization import Codec
from engine.loading.registry import available
from lab.train import TOKENIZERS

BUNDLED = {r["name"]: r for r in available() if "/assets/models/" in r["path"]}
INPUTS = {
    "text": "The ship sailed into the [MASK:6] at dawn.",
    "code": "def add(a, b):\n    return [MASK:4]\n",
    "protein": "MKTAYIAKQR[MASK:12]QISFVKSHFSRQ",
}


def test_nine_checkpoints_are_bundled():
    assert {f"{d}-{k}" for d in INPUTS for k in ("asarm", "hybrid", "judge")} <= set(BUNDLED)


@pytest.mark.parametrize("domain", sorted(INPUTS))
@pytest.mark.parametrize("sampler", ["assd-pipelined", "self-spec"])
def test_bundled_model_fills_a_span(domain, sampler):
    r = engine.infill(INPUTS[domain], domain=domain, sampler=sampler, seed=0)
    assert r.model == f"{domain}-{'hybrid' if sampler == 'self-spec' else 'asarm'}"
    before, after = INPUTS[domain].split("[MASK:")[0], INPUTS[domain].split("]", 1)[1]
    if domain != "protein":  # byte-level BPE: the span owns the space before it and starts a word
        before = before.removesuffix(" ")
        assert r.spans[0].text.startswith(" ")
    assert r.text.startswith(before) and r.text.endswith(after)
    assert r.text == before + r.spans[0].text + after
    assert r.masked_tokens == int(INPUTS[domain].split("[MASK:")[1].split("]")[0])


def test_judge_scores_a_sequence():
    from engine.loading.registry import load

    lm = load("text-judge")
    assert 0 < lm.model.token_nll(lm.codec.encode("The cat sat on the mat.")) < 20


@pytest.mark.parametrize("domain", ["text", "code"])
def test_bundled_tokenizers_round_trip(domain):
    codec = Codec.load(TOKENIZERS / domain)
    samples = ["  Tabs\tand\nnewlines \r\n survive;  ünïcödé — “quotes” 中文 😀\n\n",
               "def f(x):\n\tif x:\n        return {'a': [1, 2]}  # comment\n"]
    for s in samples:
        assert codec.decode(codec.encode(s)) == s


#: what a bundled folder may weigh (the project's rule: every retrain grows git history)
FOLDER_LIMIT, TEXT_ASARM_LIMIT = 25_000_000, 48_000_000


def test_each_bundled_folder_stays_within_its_size():
    from pathlib import Path

    folders = [p for p in (Path(engine.__file__).parents[1] / "assets" / "models").iterdir() if p.is_dir()]
    assert len(folders) >= 9
    for folder in folders:
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        assert size <= (TEXT_ASARM_LIMIT if folder.name == "text-asarm" else FOLDER_LIMIT), (folder.name, size)


@pytest.mark.parametrize("domain", ["text", "code"])
def test_the_text_and_code_asarms_carry_the_ngram_drafters_corpus_prior(domain):
    from engine.samplers.ngram_prior import load_prior

    row = BUNDLED[f"{domain}-asarm"]
    prior = load_prior(row["path"], Codec.load(row["path"]).vocab_size)
    assert prior is not None and len(prior.pairs[0]) > 10_000  # the pairs too, not the token rows alone
