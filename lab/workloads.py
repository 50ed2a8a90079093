"""Benchmark inputs: windows of held-out text with a random subset of positions masked.

Shared by `bench`, `eval` and `report`, so every number is measured on the same kind of input.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from engine.inputs.masking import MaskedInput, from_token_positions
from engine.inputs.tokenization import Codec

from .token_arrays import separator, separator_ids  # noqa: F401 - their home is token_arrays


def masked_windows(
    domain: str, codec: Codec, length: int, mask_rate: float, n: int, seed: int = 0, split: str = "test",
    max_tokens: int | None = None,
) -> list[MaskedInput]:
    """n inputs of `length` tokens from the split, each with round(mask_rate * length) positions
    masked uniformly at random (at least one). Domains without a separator (proteins) use whole
    sequences up to `length`."""
    from .data import load_split

    rng = random.Random(seed)
    docs = load_split(domain, split)
    rng.shuffle(docs)
    out: list[MaskedInput] = []
    stream: list[int] = []
    for doc in docs:
        ids = codec.encode(doc)
        if separator(domain) is None:  # whole sequences (proteins), one window each
            if len(ids) < 16:
                continue
            windows = [ids[:length]]
        else:
            stream.extend(ids + separator_ids(domain, codec))
            windows = []
            while len(stream) >= length:
                windows.append(stream[:length])
                stream = stream[length:]
        for w in windows:
            m = max(1, round(mask_rate * len(w)))
            pos = sorted(rng.sample(range(len(w)), m))
            out.append(from_token_positions(w, pos, codec, max_tokens=max_tokens or len(w)))
            if len(out) == n:
                return out
    return out


@dataclass
class InputFile:
    """A user's inputs (--inputs FILE.jsonl), parsed for one model: the MaskedInputs with the line
    each came from and what was wrong with the other lines."""

    inputs: list[MaskedInput]
    lines: list[int]  # 1-based line number of each input
    errors: list[str]  # "FILE:LINE: why" for every line left out


def read_inputs(path: str | Path, codec: Codec, max_tokens: int, seed: int = 0) -> InputFile:
    """One JSON object a line: {"text": "... [MASK:4] ..."} (the spans as `infill` takes them) or
    {"text": "...", "mask_rate": 0.5} (that share of the tokens masked at random, seeded by seed +
    line number). Blank lines are skipped; a bad line is reported by its number, the rest still run."""
    from engine.errors import InfillError
    from engine.inputs.inputs_file import text_objects
    from engine.inputs.masking import parse_masked_text

    objects, errors = text_objects(path)
    out = InputFile([], [], errors)
    for n, obj in objects:
        where = f"{path}:{n}"
        text, rate = obj["text"], obj.get("mask_rate")
        try:
            if rate is None:
                mi = parse_masked_text(text, codec, max_tokens=max_tokens)
            else:
                if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 < rate <= 1:
                    raise ValueError(f"mask_rate must be a number in (0, 1], got {rate!r}")
                if "[MASK" in text:
                    raise ValueError("give either [MASK] spans or a mask_rate, not both")
                ids = codec.encode(text)
                if not ids:
                    raise ValueError("the text is empty")
                pos = sorted(random.Random(seed + n).sample(range(len(ids)), max(1, round(rate * len(ids)))))
                mi = from_token_positions(ids, pos, codec, max_tokens=max_tokens)
        except (InfillError, ValueError) as e:
            out.errors.append(f"{where}: {e}")
            continue
        out.inputs.append(mi)
        out.lines.append(n)
    out.errors.sort(key=lambda e: int(e[len(str(path)) + 1 :].split(":", 1)[0]))  # in line order
    return out


def bench_inputs(lm, inputs_file: str | None, length: int, mask_rate: float, samples: int,
                 seed: int) -> tuple[list[MaskedInput], InputFile | None]:
    """What a benchmark measures: the inputs of `inputs_file` (its bad lines reported on stderr by
    the main process) or, without one, `samples` masked test windows. Refused when a file holds no
    usable line."""
    import sys

    from engine.errors import BadParameterError

    from .shard import is_main

    if not inputs_file:
        return masked_windows(lm.domain, lm.codec, length, mask_rate, samples, seed=seed,
                              max_tokens=lm.max_tokens), None
    src = read_inputs(inputs_file, lm.codec, lm.max_tokens, seed)
    for e in src.errors if is_main() else []:
        print(f"skipped {e}", file=sys.stderr)
    if not src.inputs:
        raise BadParameterError(f"--inputs {inputs_file}: no usable input ({len(src.errors)} line(s) left out)")
    return src.inputs, src
