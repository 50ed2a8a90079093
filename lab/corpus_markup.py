"""Markup -> prose for the documentation and dictionary packages of the text domain: HTML pages,
man pages (roff), Perl's POD and dictd dictionaries (GCIDE, the Jargon File, the Devil's
Dictionary). Pure functions, tested on small fixtures (tests/lab/test_corpus_markup.py); the
reStructuredText reader lives with the `modern` corpus (experiment_corpora.rst_prose).

Why by hand: the packages ship markup, the text model learns prose, and neither pandoc nor groff
is a dependency of this project. Every reader returns one paragraph per line (clean_prose's
form), drops code (pre blocks, no-fill roff, verbatim POD) and keeps only paragraphs that read
as sentences (`prose_paragraphs`).
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

MIN_WORDS = 6  # a paragraph shorter than this is a heading, a menu entry or a table cell
MIN_LETTER_SHARE = 0.6  # letters among characters: below it a paragraph is code, numbers or a table


def prose_paragraphs(paragraphs: list[str], min_words: int = MIN_WORDS) -> str:
    """The paragraphs that read as sentences, whitespace collapsed, one per line."""
    kept = []
    for p in paragraphs:
        words = p.split()
        text = " ".join(words)
        if len(words) >= min_words and sum(c.isalpha() for c in text) >= MIN_LETTER_SHARE * len(text):
            kept.append(text)
    return "\n".join(kept)


# ---- HTML ----------------------------------------------------------------------------------

_BLOCK = {"p", "div", "li", "ul", "ol", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "br", "tr",
          "td", "th", "table", "section", "article", "blockquote", "hr", "caption", "figcaption", "title",
          # DocBook XML (GnuCash's help)
          "para", "simpara", "listitem", "entry", "term", "varlistentry", "note", "tip", "warning"}
_SKIP = {"script", "style", "pre", "nav", "head", "header", "footer", "svg", "math", "noscript", "textarea",
         "programlisting", "screen", "synopsis", "indexterm", "info", "bookinfo", "articleinfo"}
#: class or role names of page chrome (Sphinx, DocBook, Django's theme): skipped with all inside
_CHROME = re.compile(r"\b(sphinxsidebar|related|navigation|navheader|navfooter|toc|breadcrumbs|footer|"
                     r"highlight|literallayout|programlisting|screen|synopsis|headerlink|copyright)\b")


class _HtmlText(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self.current: list[str] = []
        self.skip: list[str] = []  # the tags of skipped elements still open (innermost last)

    def _flush(self) -> None:
        if self.current:
            self.paragraphs.append("".join(self.current))
            self.current = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.skip:
            if tag == self.skip[-1] and tag not in {"br", "hr"}:
                self.skip.append(tag)  # the same tag nested inside a skipped element
            return
        marks = " ".join(v or "" for k, v in attrs if k in {"class", "role", "id"})
        if tag in _SKIP or (marks and tag in {"div", "span", "table", "p", "ul"} and _CHROME.search(marks)):
            self._flush()
            self.skip.append(tag)
            return
        if tag in _BLOCK:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if self.skip:
            if tag == self.skip[-1]:
                self.skip.pop()
            return
        if tag in _BLOCK:
            self._flush()

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.current.append(data)


def html_to_text(source: str) -> str:
    """The running prose of an HTML page: block elements are paragraphs; scripts, styles, code
    blocks (pre), navigation and page chrome are dropped; entities decoded."""
    parser = _HtmlText()
    parser.feed(source)
    parser.close()
    parser._flush()
    return prose_paragraphs(parser.paragraphs)


# ---- roff (man pages) ----------------------------------------------------------------------

_ROFF_GLYPHS = {"em": "\u2014", "en": "\u2013", "lq": "\u201c", "rq": "\u201d", "aq": "'", "dq": '"',
                "oq": "\u2018", "cq": "\u2019", "bu": "\u2022", "co": "\u00a9", "rg": "\u00ae", "hy": "-",
                "ti": "~", "ha": "^", "mi": "-", "pl": "+", "mu": "\u00d7", "de": "\u00b0", "at": "@",
                "rs": "\\", "ba": "|", "sl": "/", "fo": "\u00ab", "fc": "\u00bb"}
_ROFF_ESCAPE = re.compile(
    r"\\(?:f(?:\(..|\[[^\]]*\]|.)|s[+-]?\d+|\((..)|\[([^\]]*)\]|\*(?:\(..|\[[^\]]*\]|.)|[&:%cdu!]|([-e .0|^~])"
    r"|[nkw]'[^']*'|[hv]'[^']*'|.)"
)
_PARA_MACROS = {"PP", "LP", "P", "TP", "IP", "HP", "sp", "br", "SH", "SS", "RS", "RE", "TQ", "in", "ti", "bp"}
_NOFILL_START = {"nf", "EX", "TS", "EQ", "PS", "de", "ig"}
_NOFILL_END = {"fi", "EE", "TE", "EN", "PE", "..", "."}
_FONT_MACROS = {"B", "I", "BR", "RB", "IR", "RI", "BI", "IB", "SM", "SB", "UR", "MT", "OP"}


def _roff_inline(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        if m.group(1):
            return _ROFF_GLYPHS.get(m.group(1), "")
        if m.group(2) is not None:
            return _ROFF_GLYPHS.get(m.group(2), "")
        ch = m.group(3)
        if ch is None:
            return ""
        return {"-": "-", "e": "\\", " ": " ", ".": ".", "0": " ", "~": " "}.get(ch, "")

    return _ROFF_ESCAPE.sub(sub, text)


def _macro_args(rest: str) -> list[str]:
    return [a.strip('"') for a in re.findall(r'"[^"]*"|\S+', rest)]


def roff_to_text(source: str) -> str:
    """The prose of a man page: requests and escapes removed, font macros joined back into their
    sentence (`.BR ls (1)` -> "ls(1)"), no-fill blocks (examples, tables, synopses) dropped."""
    paragraphs: list[str] = []
    current: list[str] = []
    nofill = False
    section = ""
    for line in source.splitlines():
        if line.startswith((".", "'")):
            parts = line[1:].strip().split(None, 1)
            name = parts[0] if parts else ""
            rest = parts[1] if len(parts) > 1 else ""
            if nofill:
                if name in _NOFILL_END:
                    nofill = False
                continue
            if name in _NOFILL_START:
                paragraphs.append(" ".join(current))
                current, nofill = [], True
            elif name in _PARA_MACROS:
                paragraphs.append(" ".join(current))
                current = []
                if name in {"SH", "SS"}:
                    section = rest.strip('"').upper()
            elif name in _FONT_MACROS and section != "SYNOPSIS":
                args = _macro_args(rest)
                joiner = " " if name in {"B", "I", "SM", "SB", "UR", "MT", "OP"} else ""
                current.append(_roff_inline(joiner.join(args)))
            continue
        if nofill or section == "SYNOPSIS":
            continue
        if not line.strip():
            paragraphs.append(" ".join(current))
            current = []
            continue
        current.append(_roff_inline(line))
    paragraphs.append(" ".join(current))
    return prose_paragraphs(paragraphs)


# ---- POD (Perl's documentation) ------------------------------------------------------------

_POD_CODE = re.compile(r"([A-Z])<(?:<+\s(.*?)\s>+|([^<>]*))>")
_POD_ENTITIES = {"lt": "<", "gt": ">", "verbar": "|", "sol": "/", "quot": '"', "amp": "&"}


def _pod_inline(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        code, body = m.group(1), m.group(2) if m.group(2) is not None else m.group(3)
        if code in {"X", "Z"}:
            return ""
        if code == "E":
            return _POD_ENTITIES.get(body, html.unescape(f"&{body};") if body.isalpha() else "")
        if code == "L":
            return body.split("|", 1)[0] if "|" in body else body.split("/")[-1].strip('"')
        return body

    for _ in range(5):  # nested codes, innermost first
        text, n = _POD_CODE.subn(sub, text)
        if not n:
            break
    return text


def pod_to_text(source: str) -> str:
    """The prose of a POD file: ordinary paragraphs with formatting codes resolved; commands,
    headings and verbatim (indented, code) paragraphs dropped."""
    paragraphs: list[str] = []
    in_pod = not source.lstrip().startswith(("#!", "package ", "use "))
    skipping = False  # inside =begin ... =end
    for block in re.split(r"\n\s*\n", source):
        if not block.strip():
            continue
        if block.startswith("="):
            cmd = block.split(None, 1)[0]
            if cmd == "=cut":
                in_pod = False
            else:
                in_pod = True
            if cmd == "=begin":
                skipping = True
            elif cmd == "=end":
                skipping = False
            elif cmd == "=item" and not skipping:
                item = block.split(None, 1)[1] if len(block.split(None, 1)) > 1 else ""
                paragraphs.append(_pod_inline(item.lstrip("*0123456789. ")))
            continue
        if not in_pod or skipping or block[0] in " \t":
            continue
        paragraphs.append(_pod_inline(block))
    return prose_paragraphs(paragraphs)


# ---- dictd dictionaries --------------------------------------------------------------------


def dictd_entries(index_text: str, dict_text: bytes) -> list[tuple[str, str]]:
    """(headword, entry text) of a dictd dictionary: the .index lines `word<TAB>offset<TAB>length`
    (numbers in dictd's base64) slice the uncompressed .dict. Entries whose headword starts with
    `00-database` are the dictionary's own metadata and are left out."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    value = {c: i for i, c in enumerate(alphabet)}

    def b64(s: str) -> int:
        n = 0
        for c in s:
            n = n * 64 + value[c]
        return n

    out: list[tuple[str, str]] = []
    seen: set[int] = set()
    for line in index_text.splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[0].startswith("00-database") or parts[0].startswith("00database"):
            continue
        off, length = b64(parts[1]), b64(parts[2])
        if off in seen:  # several headwords may point at one entry
            continue
        seen.add(off)
        out.append((parts[0], dict_text[off : off + length].decode("utf-8", "replace")))
    return out


_GCIDE_SOURCE_TAG = re.compile(r"\[(?:[^\[\]]*(?:Webster|PJC|WordNet|Century|Chambers|Suppl\.|RN|JC|"
                               r"F\. ?\d|Jargon|FOLDOC)[^\[\]]*)\]")
_GCIDE_PRON = re.compile(r"\s*\\[^\\\n]*\\")
_ACCENT = re.compile(r"\[([=.\-^~'\"`,]?)([A-Za-z]{1,2})([=.\-^~'\"`,]?)\]")
_ATTRIBUTION = re.compile(r"\s--[A-Z][\w .,'&-]{0,60}$")


def dictd_prose(entry: str, headword: str) -> str:
    """One dictionary entry as prose paragraphs: the headword line's pronunciation and etymology
    dropped, source tags ([1913 Webster], [PJC]) and link braces removed, accent codes ([e^])
    reduced to their letter, quotation attributions (--Milton.) cut; paragraphs are the entry's
    blank-line separated blocks."""
    blocks = [b for b in re.split(r"\n\s*\n", entry) if b.strip()]
    paragraphs = []
    for i, block in enumerate(blocks):
        text = " ".join(block.split())
        if i == 0 and text.lower().startswith(headword.lower()) and len(text) <= len(headword) + 2:
            continue  # the headword alone on its first line
        text = _GCIDE_SOURCE_TAG.sub("", text)
        text = _GCIDE_PRON.sub("", text)
        text = _ACCENT.sub(lambda m: m.group(2), text)
        if i == 0:
            text = re.sub(r"^([^,(]+?)\s*\([^()]*\)(?=,)", r"\1", text)  # the headword's pronunciation
            text = re.sub(r"\[[^\[\]]*\]", "", text)  # the etymology of the headword line
        text = text.replace("{", "").replace("}", "")
        text = _ATTRIBUTION.sub("", text)
        paragraphs.append(text)
    return prose_paragraphs(paragraphs, min_words=4)
