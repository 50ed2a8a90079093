"""Tokenizers and the `Codec` the engine talks to.

Checkpoints carry a HF `PreTrainedTokenizerFast`; the engine wraps it in a `Codec` that knows the
special ids, refuses characters it cannot represent (instead of silently mapping them to UNK) and
decodes token runs back to text exactly.

Two families are built here: byte-level BPE (text and code: every byte is representable and
whitespace survives round trips) and a character-level vocabulary (proteins, and the tiny
alphabets used by the exactness tests).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from engine.errors import UnrepresentableTextError
from engine.inputs.domains import PROTEIN_ALPHABET  # noqa: F401  (importers read it here too; its home is the registry)

PAD, BOS, MASK, UNK = "[PAD]", "[BOS]", "[MASK]", "[UNK]"
SPECIALS = [PAD, BOS, MASK, UNK]  # ids 0..3 in every tokenizer built here

# The ASSD paper's code checkpoint (therealgabeguo/ASARM@code) was trained with whitespace the XLNet
# tokenizer cannot spell replaced by special tokens (paper, appendix D), one replacement after the
# other in this fixed order, as the authors' training and evaluation do: two spaces before three, so
# three-space runs are gone before their turn and `<pad>` never occurs in their text; four spaces are
# `<unk> <unk>`, and two or three spaces before a word both become `<unk> ▁word`.
ASSD_CODE_MAP = {"\n": "<cls>", "\t": "<sep>", "  ": "<unk>", "   ": "<pad>"}


def _wrap(tok: Tokenizer):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, bos_token=BOS, mask_token=MASK, unk_token=UNK
    )


def char_tokenizer(alphabet: str):
    """One token per character of `alphabet`; anything else is UNK (and refused by the Codec)."""
    vocab = {s: i for i, s in enumerate(SPECIALS)}
    for ch in alphabet:
        vocab.setdefault(ch, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")  # "." misses newlines
    tok.decoder = decoders.Fuse()
    return _wrap(tok)


def train_bpe(texts: Iterable[str], vocab_size: int):
    """Byte-level BPE without prefix-space tricks, so decode(encode(s)) == s for every string."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return _wrap(tok)


@functools.cache  # built once: token_bytes reads it for every token it spells
def _byte_level_table() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: vocabulary character -> the byte it stands for."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), 256)]
    chars, n = list(keep), 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars)}


class LiteTokenizer:
    """The part of a PreTrainedTokenizerFast the Codec reads, straight from tokenizer.json: loading
    a bundled model then never imports transformers (seconds of CLI start-up)."""

    def __init__(self, tok: Tokenizer, specials: dict[str, str]):
        self.backend_tokenizer = tok
        ids = {k: tok.token_to_id(v) for k, v in specials.items()}
        self.pad_token_id, self.bos_token_id = ids.get("pad_token"), ids.get("bos_token")
        self.mask_token_id, self.unk_token_id = ids.get("mask_token"), ids.get("unk_token")

    def __len__(self) -> int:
        return self.backend_tokenizer.get_vocab_size(with_added_tokens=True)

    @property
    def all_special_ids(self) -> list[int]:
        """Every added special token's id (ours: the four of SPECIALS)."""
        return sorted(i for i, t in self.backend_tokenizer.get_added_tokens_decoder().items() if t.special)

    def get_vocab(self) -> dict[str, int]:
        """Token string -> id, added tokens included (as transformers' tokenizers give it)."""
        return self.backend_tokenizer.get_vocab(with_added_tokens=True)

    def save_pretrained(self, folder) -> None:
        """Write it as transformers would (the rare path: imports transformers)."""
        _wrap(self.backend_tokenizer).save_pretrained(str(folder))

    @classmethod
    def load(cls, folder: Path) -> LiteTokenizer | None:
        """None unless the folder is one of ours: tokenizer.json with our four special tokens."""
        tj, cj = folder / "tokenizer.json", folder / "tokenizer_config.json"
        if not (tj.is_file() and cj.is_file()):
            return None
        conf = json.loads(cj.read_text())
        specials = {k: conf.get(k) for k in ("pad_token", "bos_token", "mask_token", "unk_token")}
        if sorted(v for v in specials.values() if isinstance(v, str)) != sorted(SPECIALS):
            return None
        return cls(Tokenizer.from_file(str(tj)), specials)


class Codec:
    """The engine's view of a tokenizer: ids in, ids out, exact text, clear refusals."""

    def __init__(self, hf, whitespace: dict[str, str] | None = None):  # a PreTrainedTokenizerFast or a LiteTokenizer
        """`whitespace`: text -> token string spelled around the tokenizer (ASSD_CODE_MAP); those
        tokens then stand for that text and are ordinary, samplable tokens."""
        self.hf = hf
        self.pad_id = hf.pad_token_id
        self.bos_id = hf.bos_token_id
        self.mask_id = hf.mask_token_id
        self.unk_id = hf.unk_token_id
        self.vocab_size = len(hf)
        # every special token of the tokenizer (XLNet's <sep>, <cls>, <eod>, <eop>, </s> too): the
        # models mask these ids to -inf, so they are never sampled
        self.special_ids = sorted(
            {i for i in (self.pad_id, self.bos_id, self.mask_id, self.unk_id, *hf.all_special_ids) if i is not None}
        )
        self.whitespace: dict[int, str] = {}  # token id -> the text it stands for (the code mapping)
        for text, token in (whitespace or {}).items():
            tid = hf.backend_tokenizer.token_to_id(token)
            if tid is None:
                raise UnrepresentableTextError(f"This tokenizer has no {token!r} token for the whitespace mapping.")
            self.whitespace[tid] = text
        self.special_ids = [i for i in self.special_ids if i not in self.whitespace]
        # the replacements in the mapping's order (str.replace one after the other, as the authors spell it)
        self._ws_order = [(text, tid) for tid, text in self.whitespace.items()]
        self.byte_level = isinstance(hf.backend_tokenizer.decoder, decoders.ByteLevel)
        self._not_space_led: torch.Tensor | None = None
        # User text is text: "[PAD]", "[MASK]", "<sep>" typed by a person are ordinary characters,
        # never special ids (a special id in the context gives zero-sum proposal rows). A private
        # copy of the backend with encode_special_tokens on, so `hf` itself is left as loaded.
        self._text = Tokenizer.from_str(hf.backend_tokenizer.to_str())
        self._text.encode_special_tokens = True

    @classmethod
    def load(cls, folder: str | Path) -> Codec:
        """The tokenizer saved in a model folder (the light reader when it can, else transformers')."""
        lite = LiteTokenizer.load(Path(folder))
        if lite is not None:
            return cls(lite)
        from transformers import PreTrainedTokenizerFast

        return cls(PreTrainedTokenizerFast.from_pretrained(str(folder)))

    def encode(self, text: str) -> list[int]:
        """Ids of user text. Special-token strings in it are ordinary characters (encoded as such or
        refused like any other character the model cannot represent), never special ids. With a
        whitespace mapping, its runs are replaced one mapping entry after the other, in the mapping's
        order (what `text.replace(run, token)` chained in that order and then the tokenizer give), and
        the text between two replaced runs is encoded alone."""
        if not self._ws_order:
            return self._encode(text)
        parts: list[str | int] = [text]
        for run, tid in self._ws_order:
            out: list[str | int] = []
            for part in parts:
                if isinstance(part, int):
                    out.append(part)
                    continue
                for j, piece in enumerate(part.split(run)):
                    if j:
                        out.append(tid)
                    if piece:
                        out.append(piece)
            parts = out
        ids: list[int] = []
        for part in parts:
            ids += [part] if isinstance(part, int) else self._encode(part)
        return ids

    def encode_many(self, texts: list[str]) -> list[list[int]]:
        """`encode` of each text, batched where that is exact (no whitespace mapping): the Rust
        tokenizer encodes a batch on all cores, which is what tokenizing a corpus needs. A text
        whose ids would be refused is passed to `encode`, which raises as it would alone."""
        if self._ws_order:  # a whitespace mapping: encoded piece by piece, as `encode` does
            return [self.encode(t) for t in texts]
        try:
            out = [e.ids for e in self._text.encode_batch(texts, add_special_tokens=False)]
        except (TypeError, ValueError):  # a lone surrogate somewhere (no UTF-8 form): say which text
            return [self.encode(t) for t in texts]
        bad = set(self.special_ids) | ({self.unk_id} if self.unk_id is not None else set())
        for i, ids in enumerate(out):
            if bad.intersection(ids):
                out[i] = self.encode(texts[i])
        return out

    def _encode(self, text: str) -> list[int]:
        lone = sorted({ch for ch in text if "\ud800" <= ch <= "\udfff"})
        if lone:  # not text at all (no UTF-8 form); the Rust tokenizer would raise a TypeError
            raise UnrepresentableTextError(
                "This model cannot represent these characters: " + ", ".join(repr(c) for c in lone[:20])
                + " (lone surrogates: half of a character that was cut in two)"
            )
        ids = self._text.encode(text, add_special_tokens=False).ids
        if self.unk_id is not None and self.unk_id in ids:
            bad = sorted({ch for ch in text if self.unk_id in self._text.encode(ch, add_special_tokens=False).ids})
            what = ", ".join(repr(c) for c in bad[:20]) if bad else repr(text[:40])
            raise UnrepresentableTextError(
                "This model cannot represent these characters: " + what
                + (f" (its alphabet: {self.alphabet()})" if not self.byte_level else "")
            )
        special = set(self.special_ids) & set(ids)
        if special:  # a tokenizer whose specials are not added tokens (cannot happen for ours)
            raise UnrepresentableTextError(
                "This text would become the model's special tokens "
                + ", ".join(repr(self.decode([i])) for i in sorted(special)) + "; change those characters."
            )
        return ids

    def max_chars(self, max_tokens: int) -> int | None:
        """Most characters a text of `max_tokens` tokens can have, span markers included (a token
        covers at most its longest vocabulary entry, a marker is at most 10 characters a token), so
        a far longer input is refused before it is tokenized (10 MB took 13 s). None when
        a normalizer may drop characters (no cheap bound)."""
        if self.hf.backend_tokenizer.normalizer is not None:
            return None
        if "_longest" not in self.__dict__:
            self._longest = max((len(t) for t, i in self.vocab.items() if i not in self.special_ids), default=1)
        return max_tokens * max(self._longest, 10)

    @functools.cached_property
    def vocab(self) -> dict[str, int]:
        """token -> id, read once: the tokenizer's get_vocab builds a new dict every call (~4 ms for
        4,096 tokens), and a run with a drafter compares its two models' vocabularies. Read-only."""
        return self.hf.get_vocab()

    def decode(self, ids: list[int]) -> str:
        """Ids -> text, special tokens kept (the byte-level decoder joins split characters). Mapped
        whitespace tokens become their text; the run after one decodes as the start of a line does
        (the word-initial space XLNet's tokenizer puts before every word dropped, as the paper does)."""
        if not self.whitespace:
            return self.hf.backend_tokenizer.decode(list(ids), skip_special_tokens=False)
        out, run = [], []
        for i in list(ids) + [None]:
            if i is None or i in self.whitespace:
                if run:
                    out.append(self.hf.backend_tokenizer.decode(run, skip_special_tokens=False))
                    run = []
                if i is not None:
                    out.append(self.whitespace[i])
            else:
                run.append(i)
        return "".join(out)

    def not_space_led(self) -> torch.Tensor:
        """[V] bool, True for ids whose text does not begin with a space (specials included): what a
        span that owns the space before it may not start with (engine.inputs.masking)."""
        if self._not_space_led is None:
            self._not_space_led = torch.tensor(
                [i in self.special_ids or not self.decode([i]).startswith(" ") for i in range(self.vocab_size)]
            )
        return self._not_space_led

    def space_led(self) -> torch.Tensor:
        """[V] bool, True for ids whose text begins with a space (specials included): what a span at
        the start of the text or of a line may not start with (engine.inputs.masking.starts_line)."""
        if self.__dict__.get("_space_led") is None:
            self._space_led = ~self.not_space_led() | torch.tensor(
                [i in self.special_ids for i in range(self.vocab_size)], dtype=torch.bool)
        return self._space_led

    def has_newline(self) -> torch.Tensor:
        """[V] bool, True for ids whose bytes hold a line break: what a one-line code span may not
        take (engine.inputs.masking)."""
        if self.__dict__.get("_has_newline") is None:
            self._has_newline = torch.tensor([b"\n" in self.token_bytes(i) for i in range(self.vocab_size)])
        return self._has_newline

    def token_text(self, tid: int) -> str:
        """Readable text of one token (byte-level pieces may be partial characters); kept once
        decoded, as every step of a trace spells its tokens."""
        texts = self.__dict__.setdefault("_texts", {})
        text = texts.get(tid)
        if text is None:
            text = texts[tid] = self.decode([tid])
        return text

    def token_bytes(self, tid: int) -> bytes:
        """The exact UTF-8 bytes one token stands for (a byte-level token may hold part of a
        character); special tokens stand for no text."""
        if tid in self.special_ids:
            return b""
        if self.byte_level:
            table = _byte_level_table()
            return bytes(table[ch] for ch in self.hf.backend_tokenizer.id_to_token(tid))
        return self.decode([tid]).encode("utf-8")

    def alphabet(self) -> str:
        """The single-character tokens: what a character-level model can spell (named in the message
        that refuses a character outside it)."""
        return "".join(sorted(t for t, i in self.vocab.items() if i not in self.special_ids and len(t) == 1))
