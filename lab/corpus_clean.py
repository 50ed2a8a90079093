"""Corpus cleaning, parsing and splitting as pure functions (no network, no files written), so
every rule is tested on small fixtures: prose clean-up and chunking, the Brown tagged format,
FASTA and BLAST protein databases, protein de-duplication against the test split, HumanEval's
single-line tasks, the Bible and WordNet package formats, and the seeded document split.
lab/data.py puts them to work on what the registries serve."""

from __future__ import annotations

import ast
import random
import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

# Same alphabet as engine.inputs.tokenization.PROTEIN_ALPHABET (not imported: that pulls in transformers).
PROTEIN_ALPHABET = "ACDEFGHIKLMNPQRSTVWYXBZUO"
PROSE_CHUNK_CHARS = 16_000  # long works (plays, poems) are cut into documents about this size


def split_documents(
    docs: Sequence[T], seed: int, fractions: Sequence[float]
) -> list[list[T]]:
    """Partition `docs` into len(fractions) parts by a seeded shuffle.

    Deterministic for a given seed and input order, every document lands in exactly one part,
    parts keep the input order (diffs stay readable), and every part with a non-zero fraction
    gets at least one document when there are enough, so small sources still reach valid/test.
    """
    if not fractions or any(f < 0 for f in fractions) or sum(fractions) <= 0:
        raise ValueError(f"bad split fractions {fractions!r}")
    n = len(docs)
    total = float(sum(fractions))
    sizes = [int(n * f / total) for f in fractions]
    wanted = [i for i, f in enumerate(fractions) if f > 0]
    if n >= len(wanted):
        for i in wanted:
            if sizes[i] == 0:
                sizes[i] = 1
    # The largest part absorbs rounding (and gives up what the minimum-one rule took).
    big = max(range(len(fractions)), key=lambda i: fractions[i])
    sizes[big] += n - sum(sizes)
    order = list(range(n))
    random.Random(seed).shuffle(order)
    parts: list[list[T]] = []
    start = 0
    for size in sizes:
        chosen = sorted(order[start : start + size])
        parts.append([docs[i] for i in chosen])
        start += size
    return parts


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u200b\ufeff]")


def clean_prose(text: str) -> str:
    """Normalise raw prose: one paragraph per line, whitespace collapsed, NFC, no controls.

    Paragraphs are separated by blank lines in the input; inside a paragraph line breaks are
    layout only. The result holds one paragraph per line so a blank line can separate documents.
    """
    text = unicodedata.normalize("NFC", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text)
    paragraphs = (" ".join(p.split()) for p in re.split(r"\n[ \t\f\v]*\n", text))
    return "\n".join(p for p in paragraphs if p)


def chunk_paragraphs(text: str, target_chars: int = PROSE_CHUNK_CHARS) -> list[str]:
    """Cut cleaned prose (one paragraph per line) into documents of about `target_chars`.

    Why: a whole play is one unit otherwise, and a 1% split of forty plays is nothing; chunks at
    paragraph boundaries keep splits meaningful without cutting sentences.
    """
    docs: list[str] = []
    current: list[str] = []
    size = 0
    for para in text.split("\n"):
        if not para:
            continue
        current.append(para)
        size += len(para) + 1
        if size >= target_chars:
            docs.append("\n".join(current))
            current, size = [], 0
    if current:
        docs.append("\n".join(current))
    return docs


_BROWN_NO_SPACE_BEFORE = {".", ",", ";", ":", "!", "?", ")", "]", "'", "''", "'s"}
_BROWN_NO_SPACE_AFTER = {"(", "[", "``", "$"}


def _brown_sentence(tokens: Iterable[str]) -> str:
    """Join the words of one tagged Brown sentence back into ordinary spacing."""
    out = ""
    glue_next = False
    for token in tokens:
        word, slash, _tag = token.rpartition("/")
        if not slash or not word:
            word = token  # untagged token: keep verbatim
        shown = {"``": '"', "''": '"'}.get(word, word)
        if out and not glue_next and word not in _BROWN_NO_SPACE_BEFORE:
            out += " "
        out += shown
        glue_next = word in _BROWN_NO_SPACE_AFTER
    return out


def strip_brown_tags(text: str) -> str:
    """Turn a Brown corpus file (form C, `word/tag` tokens) into one plain prose paragraph.

    Sentences sit on their own tab-indented lines; the paragraph structure is not recoverable,
    so a file becomes a single paragraph of detokenised sentences.
    """
    sentences = []
    for line in text.splitlines():
        tokens = line.split()
        if tokens:
            sentences.append(_brown_sentence(tokens))
    return clean_prose(" ".join(sentences))


def parse_fasta(text: str) -> list[tuple[str, str]]:
    """Parse FASTA into (id, sequence): uppercased, restricted to the 25-letter alphabet.

    The id is the header's first word. Letters outside PROTEIN_ALPHABET (gaps, stop `*`, digits)
    are dropped because the protein tokenizer cannot represent them; empty records are dropped.
    """
    allowed = set(PROTEIN_ALPHABET)
    records: list[tuple[str, str]] = []
    header: str | None = None
    chunks: list[str] = []

    def flush() -> None:
        if header is not None:
            seq = "".join(c for c in "".join(chunks).upper() if c in allowed)
            if seq:
                records.append((header.split()[0] if header.split() else "", seq))

    for line in text.splitlines():
        line = line.strip()
        if line.startswith(">"):
            flush()
            header, chunks = line[1:].strip(), []
        elif header is not None and line and not line.startswith(";"):
            chunks.append(line)
    flush()
    return records


# NCBIstdaa: the residue code of BLAST protein databases (.psq), byte value -> letter.
NCBISTDAA = "-ABCDEFGHIKLMNPQRSTVWXYZU*OJ"
LEAK_KMER = 32  # a training sequence sharing a stretch this long with a test sequence is dropped
LEAK_STRIDE = 8  # ... checked every LEAK_STRIDE positions: any shared stretch >= 39 residues is caught


def read_blast_protein_db(pin: bytes, psq: bytes, phr: bytes | None = None) -> list[tuple[str, str]]:
    """(id, sequence) of every record of a BLAST version-4 protein database (.pin/.psq/.phr).

    Why by hand: Debian ships these files as the only form of metastudent-data's sequences, and
    `blastdbcmd` is a second large package; the v4 layout is small. .pin: big-endian int32 version
    (4) and type (1 = protein), title and timestamp as int32 length + bytes, int32 record count,
    int64 residue total (little-endian), int32 longest, then count+1 big-endian int32 header offsets
    and count+1 sequence offsets. .psq: NCBIstdaa bytes, records separated by a zero byte. The id is
    the first word (before `|`) of the ASN.1 title in .phr, else `oid<n>`. Letters outside
    PROTEIN_ALPHABET are dropped, as parse_fasta does.
    """
    import struct

    def i32(off: int) -> int:
        return struct.unpack_from(">i", pin, off)[0]

    version, kind = i32(0), i32(4)
    if version != 4 or kind != 1:
        raise ValueError(f"not a version-4 BLAST protein database (version {version}, type {kind})")
    off = 8 + 4 + i32(8)  # title
    off += 4 + i32(off)  # timestamp
    n = i32(off)
    off += 4 + 8 + 4
    hdr = struct.unpack_from(f">{n + 1}i", pin, off)
    seqo = struct.unpack_from(f">{n + 1}i", pin, off + 4 * (n + 1))
    allowed = set(PROTEIN_ALPHABET)
    table = bytes.maketrans(bytes(range(len(NCBISTDAA))), NCBISTDAA.encode("ascii"))
    out: list[tuple[str, str]] = []
    for i in range(n):
        raw = psq[seqo[i] : seqo[i + 1]].rstrip(b"\x00")
        seq = raw.translate(table).decode("ascii", "replace")
        seq = "".join(c for c in seq if c in allowed) if not set(seq) <= allowed else seq
        name = _blast_title(phr[hdr[i] : hdr[i + 1]]) if phr is not None else ""
        if seq:
            out.append((name.split("|")[0].split()[0] if name.strip() else f"oid{i}", seq))
    return out


def _blast_title(asn: bytes) -> str:
    """The first VisibleString (tag 0x1a) of a BER-encoded Blast-def-line-set: the title."""
    j = asn.find(b"\x1a")
    if j < 0 or j + 1 >= len(asn):
        return ""
    length, k = asn[j + 1], j + 2
    if length & 0x80:  # long form: the low bits say how many length bytes follow
        nb = length & 0x7F
        length, k = int.from_bytes(asn[k : k + nb], "big"), k + nb
    return asn[k : k + length].decode("ascii", "replace")


def _kmers(seq: str, k: int, stride: int = 1) -> Iterable[str]:
    return (seq[i : i + k] for i in range(0, max(len(seq) - k, 0) + 1, stride))


def dedup_proteins(
    records: Iterable[tuple[str, str]], held_out: Iterable[str], *, seen: Iterable[str] = (),
    k: int = LEAK_KMER, stride: int = LEAK_STRIDE,
) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Keep each sequence once, and none that is in or overlaps a held-out (test) sequence.

    Dropped: repeats of a sequence already kept or in `seen` ("duplicate"), sequences identical to a
    held-out one ("identical"), and sequences sharing a stretch of >= k + stride - 1 residues with a
    held-out one ("overlap": every held-out k-mer is indexed, the candidate's k-mers are looked up
    every `stride` positions, so shorter shared stretches may or may not be caught). Sequences
    shorter than k are compared by identity only.
    """
    held = set(held_out)
    index = {m for s in held for m in _kmers(s, k)}
    kept_seqs = set(seen)
    kept: list[tuple[str, str]] = []
    counts = {"duplicate": 0, "identical": 0, "overlap": 0, "kept": 0}
    for name, seq in records:
        if seq in held:
            counts["identical"] += 1
        elif seq in kept_seqs:
            counts["duplicate"] += 1
        elif len(seq) >= k and any(m in index for m in _kmers(seq, k, stride)):
            counts["overlap"] += 1
        else:
            kept_seqs.add(seq)
            kept.append((name, seq))
            counts["kept"] += 1
    return kept, counts


def humaneval_single_line(problems: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Build the single-line infilling tasks: one per non-blank line of each canonical solution.

    prefix = prompt + solution lines before i, middle = line i + "\\n", suffix = the lines after
    i joined with "\\n" as in the original, so prefix + middle + suffix == prompt + solution.
    (If a solution lacked a final newline its last line's middle would gain one; HumanEval's all
    end in one.)
    """
    tasks: list[dict[str, Any]] = []
    for problem in problems:
        prompt = problem["prompt"]
        lines = problem["canonical_solution"].split("\n")
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            before = "\n".join(lines[:i]) + ("\n" if i else "")
            tasks.append(
                {
                    "task_id": f"{problem['task_id']}/{i}",
                    "problem_id": problem["task_id"],
                    "line_index": i,
                    "entry_point": problem["entry_point"],
                    "prefix": prompt + before,
                    "middle": line + "\n",
                    "suffix": "\n".join(lines[i + 1 :]),
                    "test": problem["test"],
                }
            )
    return tasks


def bible_chapters(module_source: str) -> list[str]:
    """Pull chapters out of a pythonbible-* module (`bible = Bible(version, text, starts, ends, ...)`).

    The whole Bible is one string with verse offsets keyed BBCCCVVV; a chapter is one document.
    Backticks stand for apostrophes in these texts.
    """
    tree = ast.parse(module_source)
    call = None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Bible":
            call = node
            break
    if call is None or len(call.args) < 4:
        raise ValueError("no Bible(...) call with text and verse offsets found")
    text = ast.literal_eval(call.args[1])
    starts: dict[int, int] = ast.literal_eval(call.args[2])
    ends: dict[int, int] = ast.literal_eval(call.args[3])
    chapters: dict[int, list[int]] = {}
    for verse in sorted(starts):
        chapters.setdefault(verse // 1000, []).append(verse)
    docs = []
    for verses in chapters.values():
        raw = text[starts[verses[0]] : ends.get(verses[-1], starts[verses[-1]])]
        doc = clean_prose(raw.replace("`", "'"))
        if doc:
            docs.append(doc)
    return docs


def wordnet_glosses(data_file_text: str) -> list[str]:
    """Turn a WordNet `data.*` file into one sentence-like paragraph per synset.

    Each line is `offset lex_filenum ss_type w_cnt word lex_id ... | gloss`; the paragraph is
    "word, synonym: gloss" with underscores as spaces. License header lines start with spaces.
    """
    paragraphs = []
    for line in data_file_text.splitlines():
        if not line or line.startswith(" ") or " | " not in line:
            continue
        head, gloss = line.split(" | ", 1)
        fields = head.split()
        try:
            count = int(fields[3], 16)
            words = [fields[4 + 2 * k] for k in range(count)]
        except (IndexError, ValueError):
            continue
        words = [re.sub(r"\(.*\)$", "", w).replace("_", " ") for w in words]
        gloss = " ".join(gloss.split())
        if gloss:
            paragraphs.append(f"{', '.join(words)}: {gloss}")
    return paragraphs


def group(items: Sequence[str], size: int) -> list[str]:
    """Join consecutive paragraphs into documents of `size` (WordNet glosses are tiny)."""
    return ["\n".join(items[i : i + size]) for i in range(0, len(items), size)]


def decode_text(raw: bytes) -> str:
    """Decode old text files: UTF-8 (BOM stripped) first, Latin-1 as the fallback."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return raw.decode("latin-1")
