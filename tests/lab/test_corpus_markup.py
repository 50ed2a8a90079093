"""Markup -> prose readers and the paragraph de-duplication of the widened text domain, and the
code domain's file de-duplication and HumanEval guard: small fixtures, no network."""

from __future__ import annotations

import json
from pathlib import Path

from lab.code_sources import dedup_files, holds_humaneval, humaneval_signatures
from lab.corpus_dedup import dedup_split_sources, paragraph_key
from lab.corpus_markup import dictd_entries, dictd_prose, html_to_text, pod_to_text, roff_to_text

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "data"
LONG = "This sentence is long enough to count as a paragraph of running prose."


def test_html_keeps_paragraphs_and_drops_code_navigation_and_scripts() -> None:
    page = (
        "<html><head><title>Ignored title words here for sure</title><script>var x = 1;</script></head><body>"
        '<div class="related"><a href="a.html">Previous topic is a link with many words</a></div>'
        f"<p>{LONG}</p><pre>for i in range(10): print(i) and more code words</pre>"
        "<p>Entities &amp; <code>inline code</code> stay inside the sentence they belong to.</p>"
        "<ul><li>Short item</li></ul><nav>Home about contact blog news and more links</nav></body></html>"
    )
    assert html_to_text(page) == (
        f"{LONG}\nEntities & inline code stay inside the sentence they belong to."
    )


def test_roff_joins_font_macros_and_drops_requests_and_examples() -> None:
    page = "\n".join([
        '.TH LS 1 "2023" "GNU" "User Commands"',
        ".SH NAME",
        "ls \\- list directory contents",
        ".SH DESCRIPTION",
        "List information about the FILEs (the current directory by default), as described in",
        ".BR dir (1)",
        "and elsewhere \\(em with \\fBbold\\fR words.",
        ".PP",
        ".nf",
        "ls -la /tmp | sort and a few more words here",
        ".fi",
        "The second paragraph says that the listing is sorted alphabetically.",
    ])
    assert roff_to_text(page) == (
        "List information about the FILEs (the current directory by default), as described in dir(1) "
        "and elsewhere \u2014 with bold words.\n"
        "The second paragraph says that the listing is sorted alphabetically."
    )


def test_pod_resolves_codes_and_drops_commands_and_verbatim() -> None:
    pod = (
        "=head1 NAME\n\nperlfoo - a manual page about things\n\n=head1 DESCRIPTION\n\n"
        "The B<print> function writes L<a list|perlfunc/print> to I<the> selected handle "
        "C<< $fh->x >> E<lt>ok.\n\n"
        "    my $x = 1;  # verbatim code with enough words in it\n\n"
        "=begin html\n\n<p>raw html with plenty of words inside it</p>\n\n=end html\n\n"
        "=cut\n\nsub code { return 1 } and this is not documentation at all\n"
    )
    assert pod_to_text(pod) == ("perlfoo - a manual page about things\n"
                                "The print function writes a list to the selected handle $fh->x <ok.")


def test_dictd_entries_and_gcide_markup() -> None:
    body = (
        b"Dog \\Dog\\ (d[o^]g), n. [AS. docga.]\n   1. (Zool.) A quadruped of the genus {Canis}, "
        b"esp. the domestic dog.\n   [1913 Webster]\n\n   The dog barked at the moon all night long.\n"
        b"                                                  --Milton.\n"
    )
    head = b"00-database-info\nThis file was converted.\n"
    data = head + body

    # dictd's base64 numbers: offset len(head) and the body's length
    def b64(n: int) -> str:
        digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        out = ""
        while True:
            out = digits[n % 64] + out
            n //= 64
            if not n:
                return out
    at, size = b64(len(head)), b64(len(body))
    index = f"00-database-info\tA\t{at}\ndog\t{at}\t{size}\nhound\t{at}\t{size}\n"
    entries = dictd_entries(index, data)
    assert [h for h, _ in entries] == ["dog"]  # metadata left out, a second headword of one entry once
    assert dictd_prose(entries[0][1], "dog") == (
        "Dog, n. 1. (Zool.) A quadruped of the genus Canis, esp. the domestic dog.\n"
        "The dog barked at the moon all night long."
    )


def test_paragraph_key_ignores_case_digits_punctuation_spacing() -> None:
    assert paragraph_key("Version 3.11: the  Dog, barks!") == paragraph_key("version 2.7 the dog barks")
    assert paragraph_key("the dog barks") != paragraph_key("the cat barks")


def test_dedup_keeps_old_sources_whole_and_held_out_out_of_train() -> None:
    test_para = "A held-out paragraph that must never be seen while training the model."
    old = ("bible", True, {
        "train": [("b/1", f"{LONG}\n{LONG}\nAmen.\n{test_para}")],
        "valid": [("b/2", "Amen.")], "test": [("b/3", test_para)],
    })
    new = ("manual", False, {
        "train": [("m/1", f"{LONG.upper()}\nAmen.\nFresh manual text that appears only in this one place here."),
                  ("m/2", test_para)],
        "valid": [], "test": [],
    })
    out, counts = dedup_split_sources([old, new])
    (_, old_out), (_, new_out) = out
    # the kept source loses only the held-out paragraph (its own repeats and short lines stay)
    assert old_out["train"] == [("b/1", f"{LONG}\n{LONG}\nAmen.")]
    assert old_out["test"] == [("b/3", test_para)]
    # the added source loses a near-duplicate of an earlier paragraph, a held-out one however short,
    # and a document left empty
    assert new_out["train"] == [("m/1", "Fresh manual text that appears only in this one place here.")]
    assert counts.held_out == {"bible": 1, "manual": 2} and counts.repeated == {"manual": 1}
    held = {paragraph_key(p) for d in (old_out["valid"] + old_out["test"]) for p in d[1].split("\n") if len(p) >= 40}
    for _, parts in out:
        for _, text in parts["train"]:
            assert not held & {paragraph_key(p) for p in text.split("\n") if len(p) >= 40}


def test_dedup_files_by_content_across_sources() -> None:
    seen: set[bytes] = set()
    first, dropped = dedup_files([("a/x.py", "x = 1\n"), ("a/y.py", "y = 2\n"), ("a/z.py", "x = 1\n")], seen)
    assert first == [("a/x.py", "x = 1\n"), ("a/y.py", "y = 2\n")] and dropped == 1
    second, dropped = dedup_files([("b/x.py", "x = 1\n"), ("b/w.py", "x = 1 \n")], seen)
    assert second == [("b/w.py", "x = 1 \n")] and dropped == 1


def test_humaneval_guard_finds_a_copied_problem() -> None:
    problems = [json.loads(line) for line in (FIXTURES / "humaneval_two.jsonl").read_text().splitlines()]
    sigs = humaneval_signatures(problems)
    assert len(sigs) == 2
    copied = "import math\n\n" + problems[0]["prompt"] + problems[0]["canonical_solution"]
    assert holds_humaneval(copied, sigs)
    assert not holds_humaneval("def other(x):\n    return x\n", sigs)
