"""The domains the page offers and the example inputs it starts with (the first example of each
domain is the page's default input). A leaf: the editor, Statistics and the form checks read it."""

from __future__ import annotations

from engine.samplers import DEFAULT_SAMPLER as ENGINE_DEFAULT_SAMPLER

DOMAINS = ["text", "code", "protein"]
#: the sampler the page starts with: the first domain's default (engine.samplers.DEFAULT_SAMPLERS:
#: the fastest exact speculative sampler measured for each domain; a domain switch picks its own)
DEFAULT_SAMPLER = ENGINE_DEFAULT_SAMPLER

EXAMPLES: dict[str, list[str]] = {
    # the first example of each domain is the page's default input: more than one span, so the first
    # Run shows drafts, accepts and rejects across rounds
    "text": [
        "After dinner we sat by the warm [MASK:4] and talked about the [MASK:8] until the fire went out.",
        "The old man walked to the [MASK:12] and looked at the sea.",
        "Once upon a time, a little [MASK] lived in a small house near the [MASK:6].",
        "In the beginning God created the heaven and the [MASK:5]. And the earth was [MASK:20].",
    ],
    "code": [
        "def mean(xs):\n    total = [MASK:6]\n    [MASK]\n    return total / len(xs)\n",
        "def add(a, b):\n    [MASK:8]\n",
        "def is_even(n):\n    return [MASK:6]\n\nprint(is_even(4))\n",
        "for i in range(10):\n    if i % 2 == 0:\n        [MASK:10]\n",
    ],
    "protein": [
        "MKTAYIAKQRQISFVKSHFSRQ[MASK:10]LGLIEVQAPILSRVGDGT[MASK:12]KAVQV",
        "MKTAYIAKQRQISFVKSHFSRQ[MASK:10]LGLIEVQAPILSRVGDGTQDNLSGAEKAVQV",
        "MVLSPADKTNVKAAWGKVGAHAGEYGAEALERMFLSFPTTKTYFPHF[MASK:20]GSAQVKGHGKKVADALTNAVAHV",
        "[MASK:8]GLSDGEWQQVLNVWGKVEADIAGHGQEVLIRLFTGHPETLEKF",
    ],
}
