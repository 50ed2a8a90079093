"""The experiment corpora (lab/experiment_corpora.py): reST prose and text8-style characters."""

from __future__ import annotations

import json
from pathlib import Path

from lab import corpus_sources, data
from lab.experiment_corpora import CHARS_ALPHABET, fetch_chars, fetch_modern, rst_prose, text8_normalise

RST = """\
:mod:`json` --- JSON encoder and decoder
=======================================

.. module:: json
   :synopsis: Encode and decode the JSON format.

**Source code:** :source:`Lib/json/__init__.py`

The :mod:`json` module exposes an API familiar to users of the standard
library ``marshal`` and `pickle <https://example.org>`_ modules. Encoding basic objects::

    >>> import json
    >>> json.dumps(['foo', {'bar': ('baz', None, 1.0, 2)}])

.. code-block:: python

   print("this is code, not prose at all")

.. function:: dump(obj, fp)

   Serialize *obj* as a JSON formatted stream to *fp* using this conversion table.

.. note:: Be cautious when parsing JSON data from untrusted sources in your programs.

A paragraph that ends here, before a bare marker.

:meth:`!__setattr__` is roughly equivalent to the following::

   class X:
       def __getattr__(self, name):
           return 1

::

    def __setattr__(self, name, value):
        self.__dict__[name] = value

>>> json.loads('[1, 2]')
"""


def test_rst_prose_keeps_sentences_and_drops_code_headings_and_markup() -> None:
    prose = rst_prose(RST).split("\n")
    assert prose[0] == ("The json module exposes an API familiar to users of the standard library marshal and "
                        "pickle modules. Encoding basic objects:")
    assert "Serialize obj as a JSON formatted stream to fp using this conversion table." in prose
    assert "__setattr__ is roughly equivalent to the following:" in prose  # a role may open a sentence
    text = "\n".join(prose)
    for gone in (">>>", "print(", "JSON encoder and decoder", "===", ":mod:", "``", "synopsis", "https",
                 "self.__dict__", "class X", "__getattr__"):
        assert gone not in text, gone


def test_text8_normalise_leaves_27_symbols_and_single_spaces() -> None:
    out = text8_normalise("It's 9 o'clock -- in Zürich, the café\nopens!")
    assert out == "it s o clock in z rich the caf opens"
    assert set(out) <= set(CHARS_ALPHABET)


def _text_corpus(root: Path) -> None:
    rows = {"train": [("bbc/1", "Markets rose on Monday."), ("bible/1", "In the beginning."),
                      ("brown/ca01", "The jury said.")],
            "valid": [("bbc/2", "Shares fell 3% in Tokyo.")], "test": [("bible/2", "Let there be light!")]}
    data.corpus_dir("text", root).mkdir(parents=True)
    for split, docs in rows.items():
        data.write_jsonl(data.corpus_dir("text", root) / f"{split}.jsonl",
                         ({"source": k, "text": t} for k, t in docs))


def test_fetch_chars_derives_every_split_from_text(tmp_path: Path) -> None:
    _text_corpus(tmp_path)
    assert fetch_chars(tmp_path, tmp_path / "work", 0)
    out = data.corpus_dir("chars", tmp_path)
    assert [r["text"] for r in data.read_jsonl(out / "valid.jsonl")] == ["shares fell in tokyo"]
    assert [r["text"] for r in data.read_jsonl(out / "test.jsonl")] == ["let there be light"]
    assert not data.verify_manifest(out)


def test_fetch_chars_leaves_out_the_sources_added_after_the_first_six(tmp_path: Path) -> None:
    _text_corpus(tmp_path)
    path = data.corpus_dir("text", tmp_path) / "train.jsonl"
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps({"source": "linux-docs/x/0", "text": "The kernel boots."}) + "\n")
    ranges = {"train": [["bbc-news", 0, 1], ["bible-web", 1, 1], ["brown", 2, 1], ["linux-docs", 3, 1]],
              "valid": [["bbc-news", 0, 1]], "test": [["bible-web", 0, 1]]}
    (data.corpus_dir("text", tmp_path) / "manifest.json").write_text(json.dumps({"source_ranges": ranges}))
    assert fetch_chars(tmp_path, tmp_path / "work", 0)
    out = data.corpus_dir("chars", tmp_path)
    assert [r["text"] for r in data.read_jsonl(out / "train.jsonl")] == [
        "markets rose on monday", "in the beginning", "the jury said"]
    assert [r["text"] for r in data.read_jsonl(out / "valid.jsonl")] == ["shares fell in tokyo"]


def test_fetch_modern_trains_only_on_text_training_news_and_brown(tmp_path: Path, monkeypatch) -> None:
    _text_corpus(tmp_path)
    docs = [(f"python-docs/p{i}.rst.txt/0", f"Paragraph number {i} of the documentation.") for i in range(300)]
    monkeypatch.setattr(corpus_sources, "fetch_package", lambda *a, **k: (tmp_path, "3.11", "PSF"))
    import lab.experiment_corpora as ec

    monkeypatch.setattr(ec, "MODERN_SOURCES", (data.Source(name="python-docs", registry="debian", package="x",
                                                           extract=lambda root: docs),))
    assert fetch_modern(tmp_path, tmp_path / "work", 0)
    out = data.corpus_dir("modern", tmp_path)
    train = [r["source"] for r in data.read_jsonl(out / "train.jsonl")]
    assert "bbc/1" in train and "brown/ca01" in train and "bible/1" not in train
    held = [r["source"] for s in ("valid", "test") for r in data.read_jsonl(out / f"{s}.jsonl")]
    assert held and all(s.startswith("python-docs/") for s in held)
    assert not set(held) & set(train)
    manifest = json.loads((out / "manifest.json").read_text())
    assert {s["name"] for s in manifest["sources"]} == {"python-docs", "text-train-modern"}
