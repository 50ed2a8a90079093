"""Bad inputs raise their own InfillError subclass with a message a person understands; good
inputs come back byte-identical around the filled spans."""

from __future__ import annotations

import pytest
import torch

from engine.errors import (
    BadParameterError,
    BadSpanLengthError,
    EmptyTextError,
    InputTooLongError,
    NoMaskError,
    UnrepresentableTextError,
)
from engine.inputs.masking import from_char_ranges, from_token_positions, parse_masked_text
from engine.inputs.tokenization import PROTEIN_ALPHABET, Codec, char_tokenizer, train_bpe
from tests.support.tiny import trace_log_prob


@pytest.fixture(scope="module")
def bpe():
    return Codec(train_bpe(["def f(x):\n    return x + 1\n", "The quick brown fox jumps. Ünïcödé ok"] * 20, 300))


@pytest.fixture(scope="module")
def protein():
    return Codec(char_tokenizer(PROTEIN_ALPHABET))


@pytest.mark.parametrize(
    "text,error",
    [
        ("no mask here", NoMaskError),
        ("", EmptyTextError),
        ("   \n", EmptyTextError),
        ("a [MASK:0] b", BadSpanLengthError),
        ("a [MASK:-3] b", BadSpanLengthError),
        ("a [MASK:999] b", BadSpanLengthError),
        ("word " * 100 + "[MASK:4]", InputTooLongError),
    ],
)
def test_bad_text_inputs(bpe, text, error):
    with pytest.raises(error) as e:
        parse_masked_text(text, bpe, max_tokens=64)
    assert len(str(e.value)) > 15  # a sentence, not a code


def test_unrepresentable_characters_named(protein):
    with pytest.raises(UnrepresentableTextError, match="'J'"):
        parse_masked_text("MKVJ[MASK:3]LL", protein, max_tokens=64)


def test_round_trip_is_byte_identical(bpe):
    text = "def f(x):\n\t  return [MASK:3]  # ü\r\n\nEnd [MASK] tail  "
    mi = parse_masked_text(text, bpe, max_tokens=256, default_span=5)
    assert len(mi.masked) == 8
    z = bpe.encode("z")[0]
    space_z = next(i for i in range(bpe.vocab_size) if bpe.decode([i]).startswith(" ") and len(bpe.decode([i])) > 1)
    w = bpe.decode([space_z])
    decided = {p: (space_z if p in mi.word_starts else z) for p in mi.masked}
    filled, spans = mi.fill(bpe, decided)
    # everything outside the spans is exactly what was typed; each span owns the space before it
    pieces = text.replace(" [MASK:3]", "\0").replace(" [MASK]", "\0").split("\0")
    assert filled == pieces[0] + spans[0].text + pieces[1] + spans[1].text + pieces[2]
    assert [s.text for s in spans] == [w + "zz", w + "zzzz"]
    for s in spans:
        assert filled[s.start : s.end] == s.text


@pytest.mark.parametrize("domain", ["text", "code"])
def test_a_mask_after_a_space_owns_it(domain):
    """' warm', ' ', [MASK] was the trap: the model rarely sees a lone space before a word."""
    codec = Codec.load(f"assets/tokenizers/{domain}")
    text = {"text": "we sat by the warm [MASK:1] and talked", "code": "def f(a, b):\n    return [MASK:2]\n"}[domain]
    lone = codec.encode(" ")[0]
    before = parse_masked_text(text, codec, max_tokens=64, word_boundary=False)
    after = parse_masked_text(text, codec, max_tokens=64)
    first = after.masked[0]
    assert before.tokens[before.masked[0] - 1] == lone  # the old way left a lone space token
    assert after.tokens[first - 1] != lone and after.word_starts == [first]
    # the constraint: at the word start only tokens that begin with a space remain possible
    logits = torch.zeros(2, codec.vocab_size, dtype=torch.float64)
    out = after.constrain(logits, [first, first + 1 if len(after.masked) > 1 else -1])
    allowed = torch.isfinite(out[0]).nonzero().flatten().tolist()
    assert allowed and all(codec.decode([i]).startswith(" ") for i in allowed)
    assert torch.isfinite(out[1]).all()  # other positions are untouched
    word = codec.encode(" fire")
    filled, spans = after.fill(codec, dict(zip(after.masked, word + word)))
    typed_outside = text.split(" [MASK")[0], text.split("]", 1)[1]
    assert filled.startswith(typed_outside[0]) and filled.endswith(typed_outside[1])
    assert spans[0].text == codec.decode((word + word)[: len(after.masked)])
    assert filled == typed_outside[0] + spans[0].text + typed_outside[1]


def test_word_unit_masks():
    from engine.inputs.word_lengths import tokens_per_word, words_to_tokens

    codec = Codec.load("assets/tokenizers/text")
    tpw = tokens_per_word(codec)
    assert 1.0 < tpw < 2.0
    mi = parse_masked_text("She opened the [MASK:3w] and smiled.", codec, max_tokens=64)
    assert len(mi.masked) == words_to_tokens(3, codec) == max(3, round(3 * tpw))
    bare = parse_masked_text("the warm [MASK] and", codec, max_tokens=64, default_span=(1, "w"))
    assert len(bare.masked) == words_to_tokens(1, codec)
    with pytest.raises(BadSpanLengthError, match="word"):
        parse_masked_text("a [MASK:0w] b", codec, max_tokens=64)
    protein = Codec(char_tokenizer(PROTEIN_ALPHABET))
    assert tokens_per_word(protein) == 1.0 and len(parse_masked_text("MK[MASK:4w]L", protein, max_tokens=64).masked) == 4


def test_char_ranges_and_token_positions(bpe):
    text = "The quick brown fox jumps."
    mi = from_char_ranges(text, [(4, 9), (20, 25)], bpe, max_tokens=64)
    assert mi.pieces == ["The", " brown fox", "."]  # each span owns the space before it
    decided = {}
    toks_a, toks_b = bpe.encode(" quick"), bpe.encode(" jumps")
    for (a, b), toks in zip(mi.span_ranges, (toks_a, toks_b)):
        decided.update(zip(range(a, b), toks))
    assert mi.fill(bpe, decided)[0] == text
    ids = bpe.encode(text)
    mi2 = from_token_positions(ids, [1, 2], bpe, max_tokens=64)
    assert mi2.masked == [1, 2] and mi2.fill(bpe, dict(zip([1, 2], ids[1:3])))[0] == text
    with pytest.raises(NoMaskError):
        from_token_positions(ids, [], bpe, max_tokens=64)


def test_bad_parameters(tiny_asarm):
    from engine.api import InfillRun

    for kw in ({"k": 0}, {"temperature": 0.0}, {"seed": -1}, {"sampler": "nope"}, {"window": "square"}):
        with pytest.raises(BadParameterError):
            InfillRun("ab[MASK:2]", model=str(tiny_asarm.path), **kw)


def test_result_and_score_agree(tiny_asarm):
    """log_prob of a run equals engine.score of the same completion."""
    import engine

    r = engine.infill("a[MASK:3]c", model=str(tiny_asarm.path), sampler="assd-pipelined", k=2, seed=3)
    assert r.masked_tokens == 3 and len(r.text) == 5 and r.text[0] == "a" and r.text[-1] == "c"
    assert r.log_prob < 0
    assert abs(r.log_prob - trace_log_prob(r.trace)) < 1e-9  # the sampler's own rows, a different path
    assert abs(engine.score(result=r) - r.log_prob) < 1e-9
    assert abs(engine.score(r.text, [(1, 4)], model=str(tiny_asarm.path)) - r.log_prob) < 1e-9
    other = engine.infill("a[MASK:3]c", model=str(tiny_asarm.path), sampler="assd-pipelined", k=2, seed=4)
    assert other.tokens != r.tokens and abs(engine.score(result=other) - r.log_prob) > 1e-6
    j = r.to_json()
    for key in ("text", "spans", "masked_tokens", "calls", "rounds", "seconds", "log_prob", "sampler", "model",
                "seed", "steps"):
        assert key in j


def test_token_positions_keep_the_given_ids_exactly():
    """Ids that would merge if their text were encoded again (t + h + e -> 'the') stay as given, so a
    window of n tokens stays n tokens long."""
    from lab.train import TOKENIZERS

    codec = Codec.load(TOKENIZERS / "text")
    ids = codec.encode("t") + codec.encode("h") + codec.encode("e") + codec.encode(" cat sat")
    assert len(codec.encode("the cat sat")) < len(ids)  # re-encoding would shorten the window
    mi = from_token_positions(ids, [3], codec, max_tokens=len(ids))
    assert len(mi.tokens) == len(ids)
    assert [t for i, t in enumerate(mi.tokens) if i != 3] == [t for i, t in enumerate(ids) if i != 3]
    assert mi.masked == [3] and mi.span_ranges == [(3, 4)]
    text, spans = mi.fill(codec, {3: ids[3]})
    assert text == "the cat sat" and spans[0].text == codec.decode([ids[3]])
    assert mi.source == "the[MASK:1]" + codec.decode(ids[4:])


def test_score_of_a_run_uses_the_runs_own_ids(tmp_path):
    """A run built from token positions whose text would tokenize differently: engine.score(result=r)
    still scores the ids the run filled (re-parsing r.source would shift every position)."""
    import torch

    import engine
    from engine.api import InfillRun
    from engine.models.asarm import AsArmConfig, AsArmModel
    from lab.train import TOKENIZERS

    codec = Codec.load(TOKENIZERS / "text")
    torch.manual_seed(0)
    cfg = AsArmConfig(vocab_size=codec.vocab_size, hidden_size=16, num_layers=1, num_heads=2,
                      intermediate_size=32, max_positions=17, domain="text", mask_token_id=codec.mask_id)
    AsArmModel(cfg).save_pretrained(tmp_path / "bpe-asarm")
    codec.hf.save_pretrained(tmp_path / "bpe-asarm")
    ids = codec.encode("t") + codec.encode("h") + codec.encode("e") + codec.encode(" cat sat")
    mi = from_token_positions(ids, [3], codec, max_tokens=16)
    assert len(parse_masked_text(mi.source, codec, max_tokens=16).tokens) != len(ids)  # the trap is real
    run = InfillRun(masked_input=mi, model=str(tmp_path / "bpe-asarm"), sampler="assd", seed=0)
    for _ in run.stream():
        pass
    r = run.result()
    assert r.tokens[:3] == ids[:3] and r.tokens[4:] == ids[4:]
    assert abs(engine.score(result=r) - r.log_prob) < 1e-9
    assert abs(engine.score(result=r) - trace_log_prob(r.trace)) < 1e-9  # the q the sampler drew from


def test_character_tokenizer_keeps_runs_of_newlines():
    import string

    codec = Codec(char_tokenizer(string.printable))
    for s in ["\n\n", "a\n\nb\r\n\tc", "def f():\n\n    return 1\n"]:
        assert codec.decode(codec.encode(s)) == s and len(codec.encode(s)) == len(s)


def test_the_api_reads_protein_text_as_the_page_does(tmp_path):
    """engine.infill takes what the page takes (a FASTA header, line breaks, spaces, lower case) and
    says what it changed, on the result and in its JSON: USING.md's "the page, the Python API and the
    CLI refuse the same inputs"."""
    import engine
    from tools.tiny_models import make_tiny_models

    make_tiny_models(tmp_path, names=("protein-asarm",))
    r = engine.infill(">sp|P69905|HBA_HUMAN\nmkta\nyiak [MASK:3] qr", model=str(tmp_path / "protein-asarm"),
                      sampler="sequential-cache", seed=1)
    assert r.text.startswith("MKTAYIAK") and r.text.endswith("QR") and len(r.text) == 13
    assert r.source == "MKTAYIAK[MASK:3]QR"
    assert r.note == ("Read as a protein sequence: dropped 1 FASTA header line, removed 3 line breaks and spaces, "
                      "upper-cased 10 letters.")
    assert r.to_json(with_steps=False)["note"] == r.note
    assert engine.infill("MKTA[MASK:2]", model=str(tmp_path / "protein-asarm"), sampler="sequential-cache").note == ""


def test_a_mask_at_the_start_of_the_text_fills_without_a_leading_space():
    """The bundled text model put a stray space first ('[MASK:3]', seed 2: ' due to val'); the first
    token of a span at the start of the text, or of a line in prose, may not begin with a space."""
    import engine

    for seed in range(4):
        for typed in ("[MASK:3]", "[MASK] is the capital of France.", "A title.\n[MASK:2] more."):
            r = engine.infill(typed, seed=seed)
            assert not r.spans[0].text.startswith(" "), (typed, seed, r.text)
