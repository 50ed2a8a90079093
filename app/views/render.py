"""Pure rendering of a trace: a `TraceState` folds Steps into per-position roles, and the functions
below turn it into HTML (every user or model string goes through html.escape), the current round's
detail rows and the live counters. No Gradio here, so it is easy to test."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field

from app.views.textmap import byte_label, char_pieces
from engine.trace import PASS_KINDS, Step, StepKind

#: role -> (label, background, foreground, description) for the legend and the CSS
ROLES: dict[str, tuple[str, str, str, str]] = {
    "context": ("context", "transparent", "inherit", "text you typed (visible to the model)"),
    "masked": ("masked", "#d0d4dc", "#333", "still to be filled"),
    "drafted": ("drafted", "#fff3b0", "#5a4a00", "proposed in this round, not yet decided"),
    "accepted": ("accepted", "#b7ebc0", "#0b4d1a", "draft kept by the speculative test"),
    "rejected": ("rejected", "#f7c1c1", "#7a0d0d", "draft thrown away (struck through)"),
    "resampled": ("resampled", "#c9d8ff", "#0d2a7a", "drawn from the residual max(q - p, 0) after a rejection"),
    "bonus": ("bonus", "#e4c9ff", "#4b1370", "free exact token when every draft passed"),
    "sampled": ("sampled", "#cdeff0", "#0d5256", "drawn directly from the target (sequential / revealed)"),
}

KIND_ROLE = {
    StepKind.ACCEPT: "accepted",
    StepKind.RESAMPLE: "resampled",
    StepKind.BONUS: "bonus",
    StepKind.SAMPLE: "sampled",
    StepKind.REVEAL: "sampled",
}

DETAIL_HEADERS = ["position", "token", "p (proposal)", "q (target)", "accept prob min(1, q/p)", "outcome"]

CSS = """
.tv-wrap {font-family: ui-monospace, SFMono-Regular, Menlo, monospace; line-height: 2.0;
  white-space: pre-wrap; word-break: break-word; padding: 8px; border-radius: 8px;
  border: 1px solid var(--border-color-primary, #ddd);}
.tv-tok {border-radius: 3px; padding: 1px 0; margin: 0 0.5px;}
.tv-legend {display: flex; flex-wrap: wrap; gap: 6px 12px; font-size: 0.85em; margin: 4px 0 8px 0;}
.tv-legend span.tv-tok {padding: 1px 6px;}
.tv-rej {text-decoration: line-through;}
.tv-title {font-weight: 600; margin: 2px 0 4px 0;}
.tv-faded {opacity: 0.35;}
.tv-ghost {font-style: italic;}
.tv-r0 {box-shadow: inset 0 -2px 0 #4a6fa5;}
.tv-r1 {box-shadow: inset 0 -2px 0 #e08a2c;}
.tv-cont {margin: 0; padding: 0;}
""" + "".join(
    f".tv-{role} {{background: {bg}; color: {fg};}}\n" for role, (_, bg, fg, _) in ROLES.items()
) + ".tv-context {color: inherit;}\n"


def esc(s: object) -> str:
    """HTML-escape any value (quotes too): every user or model string goes through it."""
    return html.escape(str(s), quote=True)


def show_token(text: str) -> str:
    """Make whitespace-only tokens visible but keep the layout (newlines stay newlines)."""
    if text == "":
        return "\u2205"
    return text


@dataclass(kw_only=True)
class TraceState:
    """Per-position display state after folding a prefix of a trace.

    With `ids` (the input's token ids, None where masked) and `bytes_of` (token id -> bytes) the
    views decode neighbouring tokens together (app.views.textmap), so multi-byte characters survive;
    without them each token's own text is shown."""

    token_texts: list[str]  # initial text of every position (mask placeholder where masked)
    masked: list[int]
    roles: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    rejected: dict[int, str] = field(default_factory=dict)  # position -> rejected draft text
    round: int = -1
    calls: float = 0.0
    elapsed: float = 0.0
    decided: int = 0
    steps_seen: int = 0
    detail: list[list] = field(default_factory=list)  # current round's rows
    ids: list[int | None] | None = None
    bytes_of: Callable[[int], bytes] | None = None
    info: dict[int, dict] = field(default_factory=dict)  # position -> p, q, round, tested, outcome
    rejected_round: dict[int, int] = field(default_factory=dict)
    rejected_ids: dict[int, int] = field(default_factory=dict)
    ghosts: dict[int, tuple[str, int | None]] = field(default_factory=dict)  # discarded untested drafts
    round_of: dict[int, int] = field(default_factory=dict)  # decided position -> its round
    _draft_p: dict[int, float | None] = field(default_factory=dict)
    _row_of: dict[int, int] = field(default_factory=dict)
    last_note: str = ""

    def __post_init__(self) -> None:
        ms = set(self.masked)
        if not self.roles:
            self.roles = ["masked" if i in ms else "context" for i in range(len(self.token_texts))]
        if not self.texts:
            self.texts = ["\u2581" if i in ms else t for i, t in enumerate(self.token_texts)]
        self.cur = list(self.ids) if self.ids is not None else [None] * len(self.token_texts)
        for i in ms:
            if i < len(self.cur):
                self.cur[i] = None

    # -- folding
    def _new_round(self, rnd: int) -> None:
        for i, r in enumerate(self.roles):
            if r == "drafted":  # drafts never decided go back to masked (shown faded until redrawn)
                self.ghosts[i] = (self.texts[i], self.cur[i])
                self.roles[i] = "masked"
                self.texts[i] = "\u2581"
                self.cur[i] = None
        self.round = rnd
        self.detail = []
        self._draft_p = {}
        self._row_of = {}

    def apply(self, s: Step) -> None:
        """Fold one more step into the display state (roles, texts, counters, the round's rows)."""
        if s.round != self.round:
            self._new_round(s.round)
        self.steps_seen += 1
        self.calls = s.calls
        self.elapsed = s.elapsed
        if s.note:
            self.last_note = s.note
        n = len(self.roles)
        toks = _pad(s.tokens, s.positions)
        if s.kind == StepKind.DRAFT:
            for pos, tok, txt, p in zip(s.positions, toks, s.texts, _pad(s.p, s.positions)):
                if 0 <= pos < n and self.roles[pos] in ("masked", "drafted"):
                    self.roles[pos], self.texts[pos], self.cur[pos] = "drafted", txt, tok
                    self.ghosts.pop(pos, None)
                    self.info[pos] = {"p": p, "q": None, "round": s.round, "tested": False, "outcome": "drafted"}
                self._draft_p[pos] = p
                self._row_of[pos] = len(self.detail)
                self.detail.append([pos, self._label(tok, txt), _f(p), "", "", "drafted"])
            return
        if s.kind in PASS_KINDS:
            return
        for pos, tok, txt, p, q in zip(s.positions, toks, s.texts, _pad(s.p, s.positions), _pad(s.q, s.positions)):
            if not 0 <= pos < n:
                continue
            if p is None and s.kind in (StepKind.ACCEPT, StepKind.REJECT):
                p = self._draft_p.get(pos)
            if s.kind == StepKind.REJECT:
                self.rejected[pos] = txt
                self.rejected_round[pos] = s.round
                if tok is not None:
                    self.rejected_ids[pos] = tok
                self.roles[pos], self.texts[pos], self.cur[pos] = "rejected", txt, None
                self.info[pos] = {"p": p, "q": q, "round": s.round, "tested": True, "outcome": "rejected"}
                self._row(pos, self._label(tok, txt), p, q, "rejected")
                continue
            role = KIND_ROLE.get(s.kind)
            if role is None:
                continue
            if self.roles[pos] not in KIND_ROLE.values():
                self.decided += 1
            self.roles[pos], self.texts[pos], self.cur[pos] = role, txt, tok
            self.ghosts.pop(pos, None)
            self.round_of[pos] = s.round
            # a draft kept untested (ASSD's first draft of a round, the pipelined exact row) was
            # already a sample of the target: Step.tested says so, and the hover text must not
            # claim a test that never ran
            tested = s.kind == StepKind.ACCEPT and s.tested
            self.info[pos] = {"p": p if tested else None, "q": q, "round": s.round, "tested": tested,
                              "outcome": role, "note": s.note}
            if s.kind == StepKind.ACCEPT and not tested:
                self._row(pos, self._label(tok, txt), None, q, "kept untested" + (f" ({s.note})" if s.note else ""),
                          tested=False)
            elif s.kind == StepKind.ACCEPT:
                self._row(pos, self._label(tok, txt), p, q, "accepted" + (f" ({s.note})" if s.note else ""))
            else:
                self.detail.append([pos, self._label(tok, txt), _f(p), _f(q), "", role])

    def _label(self, tok, txt: str) -> str:
        """One token on its own: its characters, or its bytes as <XX> when it holds part of one."""
        if self.bytes_of is not None and tok is not None:
            return byte_label(self.bytes_of(tok))
        return txt

    def _row(self, pos: int, txt: str, p, q, outcome: str, tested: bool = True) -> None:
        if p is None:
            p = self._draft_p.get(pos)
        acc = "" if (not tested or p is None or q is None or p <= 0) else f"{min(1.0, q / p):.4f}"
        row = [pos, txt, _f(p), _f(q), acc, outcome]
        if pos in self._row_of and self.detail[self._row_of[pos]][1] == txt:
            self.detail[self._row_of[pos]] = row
        else:
            self.detail.append(row)

    # -- read-outs
    def display_texts(self) -> list[str]:
        """What each position shows: decoded together with its neighbours when the byte map is
        known (multi-byte characters intact), else the token's own text."""
        if self.bytes_of is None or self.ids is None:
            return list(self.texts)
        pieces = char_pieces(self.cur, self.bytes_of)
        return [pc if pc is not None else self.rejected_text(i) if self.roles[i] == "rejected" and i in self.rejected
                else self.texts[i] for i, pc in enumerate(pieces)]

    def ghost_text(self, pos: int) -> str:
        """The faded text of a draft discarded untested at `pos`."""
        txt, tok = self.ghosts[pos]
        return self._label(tok, txt)

    def rejected_text(self, pos: int) -> str:
        """The struck-through text of the draft rejected at `pos`."""
        return self._label(self.rejected_ids.get(pos), self.rejected[pos])

    @property
    def tokens_per_call(self) -> float | None:
        """Decided tokens per network call so far (None before the first call)."""
        return self.decided / self.calls if self.calls else None

    def counters(self) -> dict:
        """The live figures the counters line shows (calls, rounds, tokens, rates, seconds)."""
        return {
            "calls": self.calls,
            "rounds": self.round + 1,
            "decided": self.decided,
            "masked": len(self.masked),
            "tokens_per_call": self.tokens_per_call,
            "seconds": self.elapsed,
            "tokens_per_second": self.decided / self.elapsed if self.elapsed > 0 else None,
        }


def _f(x) -> str:
    """A probability for people: 4 decimals, or 3 significant digits when it is tiny (never 0.0000
    for a number that is not zero)."""
    if x is None:
        return ""
    if x != 0 and abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:.4f}"


def _pad(xs: list, like: list) -> list:
    return list(xs) + [None] * (len(like) - len(xs))


def fold(token_texts: list[str], masked: list[int], steps: list[Step], upto: int | None = None,
         ids: list[int | None] | None = None, bytes_of: Callable[[int], bytes] | None = None) -> TraceState:
    """The display state after the first `upto` steps (all by default) of a trace."""
    st = TraceState(token_texts=list(token_texts), masked=list(masked), ids=ids, bytes_of=bytes_of)
    for s in steps[: len(steps) if upto is None else upto]:
        st.apply(s)
    return st


def legend_html() -> str:
    """The colour legend of the token roles, with each role's meaning on hover."""
    items = "".join(
        f'<span class="tv-tok tv-{role}" title="{esc(desc)}">{esc(label)}</span>'
        for role, (label, _, _, desc) in ROLES.items()
    )
    extra = ('<span class="tv-tok tv-rejected tv-rej tv-faded" title="a rejected or discarded draft of an '
             'earlier round">earlier draft (faded)</span>'
             '<span class="tv-tok tv-accepted tv-r1" title="decided tokens are underlined in two '
             'alternating shades, one per round">round boundary</span>')
    return f'<div class="tv-legend">{items}{extra}</div>'


def _tip(st: TraceState, i: int, role: str) -> str:
    """Hover text: p, q, acceptance probability, round and whether the speculative test ran."""
    inf = st.info.get(i)
    if role == "context":
        return f"position {i}: text you typed"
    if inf is None:
        return f"position {i}: {role}"
    p, q = inf.get("p"), inf.get("q")
    bits = [f"position {i}: {inf.get('outcome', role)}", f"round {inf['round'] + 1}"]
    if p is not None:
        bits.append(f"p (proposal) {_f(p)}")
    if q is not None:
        bits.append(f"q (target) {_f(q)}")
    if p is not None and q is not None and p > 0:
        bits.append(f"acceptance probability min(1, q/p) {_f(min(1.0, q / p))}")
    if inf.get("tested"):
        bits.append("tested by the speculative test")
    elif inf.get("outcome") == "accepted":
        bits.append("kept without a test: its proposal already was the exact target"
                    + (f" ({inf['note']})" if inf.get("note") else ""))
    else:
        bits.append("not tested")
    return " · ".join(bits)


def tokens_html(st: TraceState, title: str = "") -> str:
    """The input with every position coloured by its role (the one HTML view of a trace state; every
    text escaped)."""
    parts = []
    shown = st.display_texts()
    for i, (role, txt) in enumerate(zip(st.roles, shown)):
        if i in st.rejected and role != "rejected":
            old = st.rejected_round.get(i, st.round) < st.round
            parts.append(
                f'<span class="tv-tok tv-rejected tv-rej{" tv-faded" if old else ""}" data-pos="{i}"'
                f' data-role="rejected" title="rejected draft at {i}, round {st.rejected_round.get(i, 0) + 1}">'
                f"{esc(show_token(st.rejected_text(i)))}</span>"
            )
        if role == "masked" and i in st.ghosts:
            parts.append(
                f'<span class="tv-tok tv-drafted tv-faded tv-ghost" data-pos="{i}" data-role="discarded"'
                f' title="draft discarded untested at the end of its round">{esc(show_token(st.ghost_text(i)))}</span>'
            )
        cls = f"tv-tok tv-{role}" + (" tv-rej" if role == "rejected" else "")
        rnd = st.round_of.get(i)
        if rnd is not None:
            cls += f" tv-r{rnd % 2}"
        if txt == "" and role != "masked":
            cls += " tv-cont"  # continues the character its left neighbour shows
        parts.append(
            f'<span class="{cls}" data-pos="{i}" data-role="{role}"'
            + ("" if rnd is None else f' data-round="{rnd}"')
            + f' title="{esc(_tip(st, i, role))}">'
            f"{esc(txt if txt == '' and role != 'masked' else show_token(txt))}</span>"
        )
    head = f'<div class="tv-title">{esc(title)}</div>' if title else ""
    return f'{head}<div class="tv-wrap">{"".join(parts)}</div>'


def view_html(st: TraceState | None, title: str = "", message: str = "") -> str:
    """Legend + coloured tokens (or an escaped message when there is nothing to show)."""
    if st is None:
        body = f'<div class="tv-wrap">{esc(message or "Nothing to show yet.")}</div>'
        return legend_html() + body
    return legend_html() + tokens_html(st, title)


#: why a hybrid's call count can be fractional (docs/DESIGN.md §4), said where the fraction shows
PARTIAL_CALLS = "(a pass through part of the network counts as its share of the layers)"


def _calls(calls: float) -> str:
    """The call count: whole as a whole number; a hybrid's fraction to 2 decimals, with what it means."""
    return f"{calls:g}" if float(calls).is_integer() else f"{calls:.2f} {PARTIAL_CALLS}"


def counters_md(st: TraceState | None, status: str = "") -> str:
    """The live counters line of a trace state (an optional status after it), or just the status."""
    if st is None:
        return status
    c = st.counters()
    tpc = "–" if c["tokens_per_call"] is None else f"{c['tokens_per_call']:.2f}"
    line = (
        f"**calls** {_calls(c['calls'])} · **rounds** {c['rounds']} · **tokens** {c['decided']}/{c['masked']}"
        f" · **tokens/call** {tpc} · **seconds** {c['seconds']:.2f}"
    )
    if c["tokens_per_second"] is not None:
        line += f" · **tokens/s** {c['tokens_per_second']:.1f}"
    return line + (f" · {status}" if status else "")
