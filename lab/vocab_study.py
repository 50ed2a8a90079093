"""`python -m lab.vocab_study`: does a larger BPE vocabulary than 4,096 pay for itself?

Trains byte-level BPE tokenizers of several sizes on the same training sample the bundled
tokenizer was built from (lab.train.domain_tokenizer) and measures, on the held-out test split:
tokens per word, the share of word occurrences that are one token (what a one-token mask can
hold), and the embedding + output parameters the vocabulary costs at the bundled hidden size.
Retraining the models on a new vocabulary needs a GPU; this tells whether it is worth asking for.
"""

from __future__ import annotations

import argparse
import json
import random
import re

from engine.inputs.domains import DOMAINS
from engine.inputs.tokenization import Codec, train_bpe

from .data import load_split


def study(domain: str, sizes: list[int], hidden: int, sample_chars: int = 8_000_000) -> list[dict]:
    """For each vocabulary size: tokens per word, words per 256-token window, the share of words
    that are one token, and the embedding parameters; how the bundled tokenizers' sizes were chosen."""
    docs = load_split(domain, "train")
    random.Random(0).shuffle(docs)
    sample, size = [], 0
    for d in docs:
        sample.append(d)
        size += len(d)
        if size > sample_chars:
            break
    test = "\n\n".join(load_split(domain, "test"))
    words = re.findall(r"\S+", test)
    alpha = re.findall(r"(?<!\S)[A-Za-z]+(?=[\s.,;:!?]|$)", test)
    rows = []
    for v in sizes:
        codec = Codec(train_bpe(sample, v))
        n_tok = len(codec.encode(test))
        one = sum(1 for w in alpha if len(codec.encode(" " + w)) == 1)
        rows.append({
            "vocab": v, "tokens_per_word": n_tok / len(words), "words_per_256_tokens": 256 * len(words) / n_tok,
            "one_token_word_share": one / len(alpha), "vocab_params_M": 2 * v * hidden / 1e6,
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    """`python -m lab.vocab_study`: print the study's rows as JSON lines."""
    ap = argparse.ArgumentParser(prog="python -m lab.vocab_study")
    ap.add_argument("--domain", default="text", choices=[n for n, d in DOMAINS.items() if d.tokenizer == "bpe"])
    ap.add_argument("--sizes", default="4096,8192,16384,32768")
    ap.add_argument("--hidden", type=int, default=320)
    a = ap.parse_args(argv)
    rows = study(a.domain, [int(s) for s in a.sizes.split(",")], a.hidden)
    for r in rows:
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
