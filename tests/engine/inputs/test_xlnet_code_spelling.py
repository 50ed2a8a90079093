"""The `@code` spelling is the ASSD authors' spelling token for token, fills read as their evaluation reads
them, and the text outside the masks is what the user typed, byte for byte.

The authors replace whitespace with special tokens one replacement after the other, in a fixed order
(paper, appendix D.7): "\\n" -> <cls>, "\\t" -> <sep>, two spaces -> <unk>, three spaces -> <pad>; then
the tokenizer reads the special-token strings as the special tokens. `authors_ids` below does exactly
that with str.replace; the studio's Codec must give the same ids on real code. No code test split
ships with this checkout, so the fixture is real Python files of the standard library, read with a
stand-in XLNet tokenizer (XLNet's special tokens, sentencepiece-like pieces) that covers their
characters."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest
import torch
from transformers import XLNetTokenizer

from engine.inputs.masking import parse_masked_text
from engine.inputs.tokenization import ASSD_CODE_MAP, Codec
from tests.engine.loading.test_hub_revisions import SPECIALS, standin_xlnet_tokenizer

AUTHORS_ORDER = [("\n", "<cls>"), ("\t", "<sep>"), ("  ", "<unk>"), ("   ", "<pad>")]
STDLIB = Path(sysconfig.get_paths()["stdlib"])
FILES = ["textwrap.py", "json/encoder.py", "json/decoder.py", "shlex.py", "fnmatch.py", "glob.py", "bisect.py",
         "heapq.py", "string.py", "colorsys.py", "keyword.py", "this.py", "queue.py", "sched.py", "graphlib.py",
         "tokenize.py", "dataclasses.py", "argparse.py", "difflib.py", "pprint.py"]
WORDS = ["def", "return", "self", "if", "else", "elif", "for", "in", "not", "and", "or", "import", "from",
         "class", "None", "True", "False", "is", "raise", "while", "with", "as", "lambda", "yield"]


def code_texts() -> list[str]:
    texts = [(STDLIB / f).read_text(encoding="utf-8") for f in FILES if (STDLIB / f).is_file()]
    assert len(texts) >= 15, "the standard library's code fixture is missing"
    return texts


def code_tokenizer(texts: list[str]) -> XLNetTokenizer:
    """XLNet's special tokens and sentencepiece-style pieces (Unigram + Metaspace) covering every
    character of `texts`: each character alone and after the word-start mark, and a few keywords."""
    chars = sorted({c for t in texts for c in t} - {" ", "\n", "\t"})
    pieces = ["▁"] + [p for c in chars for p in (c, "▁" + c)] + ["▁" + w for w in WORDS] + WORDS
    return standin_xlnet_tokenizer([(p, -1.0 if len(p) > 2 else -6.0) for p in dict.fromkeys(pieces)])


def authors_ids(tok: XLNetTokenizer, text: str) -> list[int]:
    """The authors' spelling: str.replace in their fixed order, then the tokenizer (special-token
    strings read as special tokens, no <s> or </s> added)."""
    for run, token in AUTHORS_ORDER:
        text = text.replace(run, token)
    return tok(text, add_special_tokens=False)["input_ids"]


@pytest.fixture(scope="module")
def fixture():
    texts = code_texts()
    tok = code_tokenizer(texts)
    return texts, tok, Codec(tok, whitespace=ASSD_CODE_MAP)


def test_the_code_spelling_is_the_authors_token_for_token(fixture):
    texts, tok, codec = fixture
    total = 0
    for text in texts:
        assert "<unk>" not in text and "<cls>" not in text  # (typed special strings are text in the studio)
        want = authors_ids(tok, text)
        assert codec.encode(text) == want
        total += len(want)
    pad = SPECIALS.index("<pad>")
    assert total > 50_000 and all(pad not in authors_ids(tok, t) for t in texts), "<pad> never occurs"


def test_four_spaces_are_two_unk_and_three_read_as_two():
    tok = code_tokenizer(["def f(x): return x = y"])
    codec = Codec(tok, whitespace=ASSD_CODE_MAP)
    unk, cls, ret = SPECIALS.index("<unk>"), SPECIALS.index("<cls>"), tok.convert_tokens_to_ids("▁return")
    assert codec.encode("\n    return") == [cls, unk, unk, ret] == authors_ids(tok, "\n    return")
    assert codec.encode("\n  return") == codec.encode("\n   return") == [cls, unk, ret]
    reads = {"\n    return": "\n    return", "\n   return": "\n  return", "\n  return": "\n  return",
             "\n        return": "\n        return", "\n\treturn": "\n\treturn", "\n return": "\nreturn",
             "x  = f": "x  = f", "x   = f": "x  = f", "x = f": "x = f"}
    for typed, read in reads.items():
        assert codec.decode(codec.encode(typed)) == read, typed


def test_text_outside_the_masks_is_byte_identical(fixture):
    texts, tok, codec = fixture
    gen = torch.Generator().manual_seed(0)
    for text in texts[:8]:
        lines = text.split("\n")[:60]
        for i in (5, 17, 33):  # a bare mask alone on a line, keeping its indentation
            lines[i] = lines[i][: len(lines[i]) - len(lines[i].lstrip())] + "[MASK]"
        typed = "\n".join(lines)
        mi = parse_masked_text(typed, codec, max_tokens=10_000, default_span=4, line_masks=True)
        decided = {p: int(torch.randint(9, codec.vocab_size, (1,), generator=gen)) for p in mi.masked}
        decided[mi.masked[0]] = SPECIALS.index("<unk>")  # whitespace tokens inside a fill too
        out, spans = mi.fill(codec, decided)
        rebuilt, cursor = [], 0
        for s in spans:
            rebuilt.append(out[cursor:s.start])
            cursor = s.end
        rebuilt.append(out[cursor:])
        assert "".join(rebuilt) == typed.replace("[MASK]", "")
        assert len(spans) == 3 and all(s.text for s in spans)
