"""`python -m engine bench fills`: do the fills read right?

Three small sets written for this benchmark (lab/benchdata, none from the corpora):
- text: 60 sentences with one masked word and the words a reader would accept there. Measured:
  the share of sampled fills a reader accepts, and the share that are whole words (one word after
  the space, found in the text training split's vocabulary, or of word shape when no corpus).
- code: 26 small functions with tests, one line masked; the share of filled programs that pass
  their tests (each in a fresh interpreter, in a temp dir, with a timeout and sockets disabled).
- protein: 9 well-known proteins with 15% of residues masked (seeded); the exact joint NLL of the
  true masked residues under the protein AS-ARM against the unigram baseline, and how often sampled
  fills recover the true residue.

"Before" and "after" the word-boundary fix: `word_boundary=False` leaves the space before a mask
in the context (the model must fill after a lone-space token, as the engine parsed text before
the fix); `True` lets the mask own that space, so the fill is a token that carries its own space.

Mask length (`--lengths`): `reference` is the token count of the reference fill as the mask owns
it (text: the first accepted word, which the sets list first because it is the most likely one;
code: the original line), so both modes get the exact length of a right answer and the comparison
isolates the space. `default` (text only) is a bare [MASK], one word, what a person types.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from collections import Counter
from pathlib import Path

from engine.api import joint_log_prob
from engine.inputs.domains import default_span, studio_domains
from engine.inputs.masking import MaskedInput, from_char_ranges, parse_masked_text
from engine.loading.loaded_model import LoadedModel
from engine.loading.registry import default_model, load

from .runs import drain

DATA = Path(__file__).resolve().parent / "benchdata"
WORD_FILL = re.compile(r" ([A-Za-z]+(?:['-][A-Za-z]+)*)")  # one word, owning the space before it
#: UniProtKB/Swiss-Prot amino-acid composition (%), the unigram baseline when no corpus is fetched
SWISSPROT_COMPOSITION = {
    "A": 8.25, "R": 5.53, "N": 4.06, "D": 5.45, "C": 1.37, "Q": 3.93, "E": 6.75, "G": 7.07, "H": 2.27,
    "I": 5.96, "L": 9.66, "K": 5.84, "M": 2.42, "F": 3.86, "P": 4.70, "S": 6.56, "T": 5.34, "W": 1.08,
    "Y": 2.92, "V": 6.87,
}
NO_NETWORK = "import socket as _s\n_s.socket = _s.create_connection = None  # bench fills: no network\n"


def load_text_items() -> list[dict]:
    """The one-word fill sentences of the text benchmark."""
    return json.loads((DATA / "fills_text.json").read_text(encoding="utf-8"))["items"]


def load_code_items() -> list[dict]:
    """The single-line code fills, with the tests that check them."""
    from .benchdata.fills_code import CODE_ITEMS

    return CODE_ITEMS


def load_protein_items() -> tuple[list[dict], float]:
    """The protein fill items and the mask rate they were cut at."""
    d = json.loads((DATA / "fills_protein.json").read_text(encoding="utf-8"))
    return d["items"], float(d["mask_rate"])


def mask_word(text: str, start: int, end: int, lm: LoadedModel, word_boundary: bool,
              length: str = "reference") -> MaskedInput:
    """Mask text[start:end] (a word, or a line's code after its indentation; a space right before
    it) through the engine's own parser, as a person's typed mask reaches it. word_boundary=True:
    the mask owns that space (the fix); False: the space stays in the context (before the fix).
    length "reference": [MASK:n] with n the token count of the reference as the mask owns it;
    "default": a bare [MASK] (in text, one word converted with the tokenizer's average)."""
    a = start - 1 if word_boundary else start
    sentinel = f"[MASK:{len(lm.codec.encode(text[a:end]))}]" if length == "reference" else "[MASK]"
    return parse_masked_text(text[:start] + sentinel + text[end:], lm.codec, max_tokens=lm.max_tokens,
                             default_span=default_span(lm.domain), word_boundary=word_boundary)


def _sample(mi: MaskedInput, lm: LoadedModel, sampler: str, k: int, seed: int, temperature: float) -> str:
    return drain(lm, mi, sampler, seed, k=k, temperature=temperature).result.text


def judge_word(completed: str, prefix: str, suffix: str, accept: set[str], vocab: frozenset[str] | None) -> dict:
    """Whether a completed sentence reads right: the text around the mask must come back
    unchanged, and what lies between is one word after one space."""
    if not (completed.startswith(prefix) and completed.endswith(suffix)) or len(completed) < len(prefix) + len(suffix):
        return {"fill": None, "whole_word": False, "accepted": False, "context_intact": False}
    middle = completed[len(prefix) : len(completed) - len(suffix)]
    m = WORD_FILL.fullmatch(middle)
    word = m.group(1).lower() if m else None
    whole = word is not None and (vocab is None or word in vocab or word in accept)
    return {"fill": middle, "whole_word": whole, "accepted": word in accept, "context_intact": True}


def bench_text(model: str, seeds: int, temperatures: list[float], modes: list[bool], sampler: str, k: int,
               limit: int | None = None, vocab: frozenset[str] | None = None,
               lengths: tuple[str, ...] = ("reference",)) -> dict:
    """Text fills: how often a fill is an accepted word, a whole word, and leaves the context
    intact, per mask length, word-boundary mode and temperature."""
    lm = load(model)
    items = load_text_items()[:limit]
    rows = []
    for length, wb, t in ((n, w, t) for n in lengths for w in modes for t in temperatures):
        acc = whole = intact = runs = 0
        fills: Counter[str] = Counter()
        for idx, it in enumerate(items):
            before, after = it["text"].split("[MASK]")
            ref = before + it["accept"][0] + after
            mi = mask_word(ref, len(before), len(before) + len(it["accept"][0]), lm, wb, length)
            for s in range(seeds):
                out = _sample(mi, lm, sampler, k, 1000 * idx + s, t)
                j = judge_word(out, before[:-1], after, set(it["accept"]), vocab)
                acc += j["accepted"]
                whole += j["whole_word"]
                intact += j["context_intact"]
                runs += 1
                if idx == 0:
                    fills[repr(j["fill"])] += 1
        rows.append({"length": length, "word_boundary": wb, "temperature": t, "runs": runs, "accepted": acc / runs,
                     "whole_word": whole / runs, "context_intact": intact / runs,
                     "example": {"text": items[0]["text"], "fills": dict(fills.most_common(5))}})
    return {"model": lm.name, "sentences": len(items), "seeds": seeds,
            "whole_word_dictionary": "text training split" if vocab is not None else "none (word shape only)",
            "rows": rows}


def run_program(program: str, timeout: float = 10.0) -> bool:
    """Run a filled program with its tests in an isolated interpreter (no network); True if they pass."""
    from .evaluate import run_tests_in_subprocess  # fresh isolated interpreter, temp dir, timeout

    return run_tests_in_subprocess(NO_NETWORK + program, timeout=timeout)


def bench_code(model: str, seeds: int, temperatures: list[float], modes: list[bool], sampler: str, k: int,
               limit: int | None = None) -> dict:
    """Code fills: how often the filled line passes its tests or equals the reference."""
    lm = load(model)
    items = load_code_items()[:limit]
    rows = []
    for wb in modes:
        for t in temperatures:
            passed = exact = runs = 0
            for idx, it in enumerate(items):
                src = it["source"]
                start = _line_start(src, it["masked"])
                end = start + len(it["masked"])
                mi = mask_word(src, start, end, lm, wb)
                for s in range(seeds):
                    out = _sample(mi, lm, sampler, k, 1000 * idx + s, t)
                    passed += run_program(out + "\n" + it["tests"])
                    exact += out == src
                    runs += 1
            rows.append({"word_boundary": wb, "temperature": t, "runs": runs, "passed": passed / runs,
                         "exact_line": exact / runs})
    return {"model": lm.name, "programs": len(items), "seeds": seeds, "rows": rows}


def _line_start(src: str, line: str) -> int:
    """Offset of the masked line's code (after its indentation); the line must occur once."""
    hits = [m.start() + len(m.group(1)) for m in re.finditer(r"(?m)^( +)" + re.escape(line) + r"$", src)]
    if len(hits) != 1:
        raise ValueError(f"masked line {line!r} occurs {len(hits)} times (indented) in its source")
    return hits[0]


def protein_unigram() -> tuple[dict[str, float], str]:
    """Residue frequencies of the protein training split (add-one), else Swiss-Prot's composition."""
    from .data import DataMissingError, load_split

    try:
        docs = load_split("protein", "train")
    except DataMissingError:
        total = sum(SWISSPROT_COMPOSITION.values())
        return {a: v / total for a, v in SWISSPROT_COMPOSITION.items()}, "UniProtKB/Swiss-Prot composition"
    c: Counter[str] = Counter()
    for d in docs:
        c.update(d)
    total = sum(c.values())
    letters = sorted(c)
    return {a: (c[a] + 1) / (total + len(letters)) for a in letters}, f"protein training split ({total} residues)"


def bench_protein(model: str, seeds: int, temperatures: list[float], sampler: str, k: int,
                  limit: int | None = None, unigram: tuple[dict[str, float], str] | None = None) -> dict:
    """Protein fills: the model's NLL of the true residues against a unigram baseline, and how
    often sampled residues recover the true ones."""
    lm = load(model)
    items, rate = load_protein_items()
    items = items[:limit]
    probs, source = unigram or protein_unigram()
    rows, nll_model, nll_uni, n_tot = [], 0.0, 0.0, 0
    rec = {t: [0, 0] for t in temperatures}
    expected_uni = 0.0
    for idx, it in enumerate(items):
        seq = it["sequence"]
        pos = sorted(random.Random(idx).sample(range(len(seq)), max(1, round(rate * len(seq)))))
        mi = from_char_ranges(seq, [(p, p + 1) for p in pos], lm.codec, max_tokens=lm.max_tokens)
        true = lm.codec.encode(seq)
        lp = joint_log_prob(lm, mi, true)
        u = -sum(math.log(probs.get(seq[p], min(probs.values()))) for p in pos)
        expected_uni += sum(probs.get(seq[p], 0.0) for p in pos)
        nll_model += -lp
        nll_uni += u
        n_tot += len(pos)
        row = {"protein": it["name"], "length": len(seq), "masked": len(pos),
               "nll_model": -lp / len(pos), "nll_unigram": u / len(pos)}
        for t in temperatures:
            for s in range(seeds):
                out = _sample(mi, lm, sampler, k, 1000 * idx + s, t)
                hit = sum(out[p] == seq[p] for p in pos)
                rec[t][0] += hit
                rec[t][1] += len(pos)
        rows.append(row)
    return {"model": lm.name, "proteins": len(items), "mask_rate": rate, "masked_residues": n_tot,
            "unigram_source": source, "nll_model": nll_model / n_tot, "nll_unigram": nll_uni / n_tot,
            "ppl_model": math.exp(nll_model / n_tot), "ppl_unigram": math.exp(nll_uni / n_tot),
            "recovery": {str(t): h / n for t, (h, n) in rec.items()},
            "recovery_unigram_expected": expected_uni / n_tot, "seeds": seeds, "rows": rows}


#: the domains this benchmark has a hand-made fill set for (lab/benchdata/fills_*.json)
FILL_SETS = ("text", "code", "protein")


def run_fills(domains: list[str], seeds: int = 5, temperatures: list[float] | None = None,
              modes: list[bool] | None = None, sampler: str = "assd", k: int = 5, limit: int | None = None,
              models: dict[str, str] | None = None, progress=None,
              lengths: tuple[str, ...] = ("reference",)) -> dict:
    """The fill benchmark over the domains asked for, each on its model (default: the bundled AS-ARM)."""
    temperatures = temperatures or [1.0, 0.4]
    modes = [False, True] if modes is None else modes
    models = models or {}
    out: dict = {"sampler": sampler, "k": k, "seeds": seeds, "temperatures": temperatures}
    for d in domains:
        model = models.get(d) or default_model(d, "asarm")
        if d == "text":
            vocab = _text_vocab()
            out["text"] = bench_text(model, seeds, temperatures, modes, sampler, k, limit, vocab, lengths)
        elif d == "code":
            out["code"] = bench_code(model, seeds, temperatures, modes, sampler, k, limit)
        elif d == "protein":
            out["protein"] = bench_protein(model, seeds, temperatures, sampler, k, limit)
        else:
            raise ValueError(f"no fill set for domain {d!r} (fill sets: {', '.join(FILL_SETS)})")
        if progress:
            progress(d, out[d])
    return out


def _text_vocab() -> frozenset[str] | None:
    from .data import DataMissingError
    from .metrics import train_words

    try:
        return train_words("text")
    except DataMissingError:
        return None


def _mode(wb: bool) -> str:
    return "after (mask owns the space)" if wb else "before (space in context)"


def print_report(res: dict) -> None:
    """The fill benchmark's result as plain text."""
    if "text" in res:
        r = res["text"]
        print(f"text: {r['model']}, {r['sentences']} sentences x {r['seeds']} seeds, {res['sampler']} k={res['k']}; "
              f"whole words checked against: {r['whole_word_dictionary']}")
        for row in r["rows"]:
            print(f"  {row['length']:<9} {_mode(row['word_boundary']):<30} T={row['temperature']:<4} "
                  f"accepted {row['accepted']:6.1%}  "
                  f"whole word {row['whole_word']:6.1%}  ({row['runs']} fills)")
    if "code" in res:
        r = res["code"]
        print(f"code: {r['model']}, {r['programs']} programs x {r['seeds']} seeds")
        for row in r["rows"]:
            print(f"  {_mode(row['word_boundary']):<30} T={row['temperature']:<4} tests pass {row['passed']:6.1%}  "
                  f"line exact {row['exact_line']:6.1%}  ({row['runs']} programs)")
    if "protein" in res:
        r = res["protein"]
        print(f"protein: {r['model']}, {r['proteins']} proteins, {r['mask_rate']:.0%} masked "
              f"({r['masked_residues']} residues); unigram from {r['unigram_source']}")
        print(f"  NLL/residue of the true masked residues: model {r['nll_model']:.3f} (ppl {r['ppl_model']:.2f}), "
              f"unigram {r['nll_unigram']:.3f} (ppl {r['ppl_unigram']:.2f})")
        rec = ", ".join(f"T={t}: {v:.1%}" for t, v in r["recovery"].items())
        print(f"  sampled residues equal to the true one: {rec} (unigram sampling: "
              f"{r['recovery_unigram_expected']:.1%})")


def run(argv: list[str]) -> int:
    """`python -m engine bench fills`: the command line of the fill benchmark."""
    ap = argparse.ArgumentParser(prog="python -m engine bench fills", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--domains", default=",".join(d for d in studio_domains() if d in FILL_SETS),
                    help=f"comma-separated; the domains with a fill set: {', '.join(FILL_SETS)}")
    ap.add_argument("--seeds", type=int, default=5, help="samples per item and setting")
    ap.add_argument("--temperatures", default="1,0.4")
    ap.add_argument("--modes", default="before,after", help="before: space in the context; after: the mask owns it")
    ap.add_argument("--sampler", default="assd")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--lengths", default="reference",
                    help="text mask lengths: reference ([MASK:n], n the tokens of the first accepted word), "
                         "default (a bare [MASK]: one word); comma-separated")
    ap.add_argument("--limit", type=int, default=None, help="first N items of each set (a quick check)")
    for d in studio_domains():
        ap.add_argument(f"--{d}-model", default=None, help=f"the {d} AS-ARM (default: {d}-asarm)")
    ap.add_argument("--threads", type=int, default=1,
                    help="torch CPU threads (1: tiny forward passes gain nothing from more, and lose a lot on a busy machine)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if a.threads:
        import torch

        torch.set_num_threads(a.threads)
    modes = [{"before": False, "after": True}[m.strip()] for m in a.modes.split(",") if m.strip()]
    models = {d: getattr(a, f"{d}_model") for d in studio_domains()}

    def show(domain: str, r: dict) -> None:
        print(f"  {domain}: done", file=sys.stderr, flush=True)

    res = run_fills([d.strip() for d in a.domains.split(",") if d.strip()], a.seeds,
                    [float(t) for t in a.temperatures.split(",")], modes, a.sampler, a.k, a.limit,
                    {d: m for d, m in models.items() if m}, progress=show,
                    lengths=tuple(x.strip() for x in a.lengths.split(",") if x.strip()))
    if a.json:
        print(json.dumps(res))
    else:
        print_report(res)
    return 0
