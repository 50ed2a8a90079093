"""The larger protein source: reading BLAST v4 protein databases and de-duplicating against the
test split, on a tiny fixture written here (no network, no package)."""

from __future__ import annotations

import struct

import pytest

from lab.data import NCBISTDAA, dedup_proteins, read_blast_protein_db


def _asn_title(title: str) -> bytes:
    """The start of a Blast-def-line-set as makeblastdb writes it: the title as a VisibleString."""
    t = title.encode()
    length = bytes([len(t)]) if len(t) < 128 else bytes([0x81, len(t)])
    return b"\x30\x80\x30\x80\xa0\x80\x1a" + length + t + b"\x00\x00\xa1\x80\x30\x80"


def blast_db(records: list[tuple[str, str]]) -> tuple[bytes, bytes, bytes]:
    """(.pin, .psq, .phr) of a version-4 protein database holding `records`."""
    phr, psq = b"", b"\x00"
    hdr, seqo = [], []
    for title, seq in records:
        hdr.append(len(phr))
        phr += _asn_title(title)
        seqo.append(len(psq))
        psq += bytes(NCBISTDAA.index(c) for c in seq) + b"\x00"
    hdr.append(len(phr))
    seqo.append(len(psq))

    def lp(s: bytes) -> bytes:
        return struct.pack(">i", len(s)) + s

    n = len(records)
    pin = struct.pack(">ii", 4, 1) + lp(b"tiny db") + lp(b"Nov 23, 2026  1:00 PM\x00\x00\x00")
    pin += struct.pack(">i", n) + struct.pack("<q", sum(len(s) for _, s in records))
    pin += struct.pack(">i", max(len(s) for _, s in records))
    pin += struct.pack(f">{n + 1}i", *hdr) + struct.pack(f">{n + 1}i", *seqo)
    return pin, psq, phr


def test_blast_db_records_come_back_with_ids_and_letters() -> None:
    long_title = "Q" + "9" * 140 + "|GO:0000001"  # a title past 127 bytes uses BER's long length form
    recs = [("P12345|GO:0006200,GO:0006754", "MKVLA"), (long_title, "ACDEFGHIKLMNPQRSTVWY"), ("X1", "MK*J-A")]
    out = read_blast_protein_db(*blast_db(recs))
    assert out == [("P12345", "MKVLA"), ("Q" + "9" * 140, "ACDEFGHIKLMNPQRSTVWY"), ("X1", "MKA")]


def test_blast_db_without_headers_names_records_by_oid() -> None:
    pin, psq, _ = blast_db([("A", "MK"), ("B", "WW")])
    assert read_blast_protein_db(pin, psq) == [("oid0", "MK"), ("oid1", "WW")]


def test_blast_db_refuses_other_versions_and_nucleotides() -> None:
    pin, psq, phr = blast_db([("A", "MK")])
    with pytest.raises(ValueError, match="version-4 BLAST protein"):
        read_blast_protein_db(struct.pack(">i", 5) + pin[4:], psq, phr)
    with pytest.raises(ValueError, match="version-4 BLAST protein"):
        read_blast_protein_db(pin[:4] + struct.pack(">i", 0) + pin[8:], psq, phr)


def test_dedup_drops_repeats_test_sequences_and_overlaps() -> None:
    test_seq = "M" + "ACDEFGHIKLMNPQRSTVWY" * 3  # 61 residues
    records = [
        ("a", "MKKLLPP"),  # kept
        ("b", "MKKLLPP"),  # repeat of a
        ("c", test_seq),  # identical to a test sequence
        ("d", "WWWW" + test_seq[5:50] + "YYYY"),  # shares a 45-residue stretch with it
        ("e", "WWWW" + test_seq[5:15] + "YYYY"),  # shares only 10 (< k): kept
        ("f", "GGGGG"),  # already in `seen` (say, the first source)
    ]
    kept, counts = dedup_proteins(records, [test_seq], seen=["GGGGG"], k=16, stride=4)
    assert [name for name, _ in kept] == ["a", "e"]
    assert counts == {"kept": 2, "duplicate": 2, "identical": 1, "overlap": 1}


def test_dedup_catches_every_shared_stretch_of_k_plus_stride_minus_one() -> None:
    """The promise of the docstring: any shared stretch >= k + stride - 1 is caught, whatever its
    offset in the candidate."""
    test_seq = "".join("ACDEFGHIKLMNPQRSTVWY"[(i * 7) % 20] for i in range(80))
    k, stride = 8, 3
    for offset in range(6):
        cand = "W" * offset + test_seq[20 : 20 + k + stride - 1] + "W" * 3
        kept, counts = dedup_proteins([("x", cand)], [test_seq], k=k, stride=stride)
        assert kept == [] and counts["overlap"] == 1, offset
