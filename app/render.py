"""Pure rendering of a trace: a `TraceState` folds Steps into per-position roles, and the functions
below turn it into HTML (every user or model string goes through html.escape), the current round's
detail rows and the live counters. No Gradio here, so it is easy to test."""

from __future__ import annotations

import html
from dataclasses import dataclass, field

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
""" + "".join(
    f".tv-{role} {{background: {bg}; color: {fg};}}\n" for role, (_, bg, fg, _) in ROLES.items()
) + ".tv-context {color: inherit;}\n"


def esc(s: object) -> str:
    return html.escape(str(s), quote=True)


def show_token(text: str) -> str:
    """Make whitespace-only tokens visible but keep the layout (newlines stay newlines)."""
    if text == "":
        return "\u2205"
    return text


@dataclass
class TraceState:
    """Per-position display state after folding a prefix of a trace."""

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
    _draft_p: dict[int, float | None] = field(default_factory=dict)
    _row_of: dict[int, int] = field(default_factory=dict)
    last_note: str = ""

    def __post_init__(self) -> None:
        ms = set(self.masked)
        if not self.roles:
            self.roles = ["masked" if i in ms else "context" for i in range(len(self.token_texts))]
        if not self.texts:
            self.texts = ["\u2581" if i in ms else t for i, t in enumerate(self.token_texts)]

    # -- folding
    def _new_round(self, rnd: int) -> None:
        for i, r in enumerate(self.roles):
            if r == "drafted":  # drafts never decided go back to masked
                self.roles[i] = "masked"
                self.texts[i] = "\u2581"
        self.round = rnd
        self.detail = []
        self._draft_p = {}
        self._row_of = {}

    def apply(self, s: Step) -> None:
        if s.round != self.round:
            self._new_round(s.round)
        self.steps_seen += 1
        self.calls = s.calls
        self.elapsed = s.elapsed
        if s.note:
            self.last_note = s.note
        n = len(self.roles)
        if s.kind == StepKind.DRAFT:
            for pos, txt, p in zip(s.positions, s.texts, s.p):
                if 0 <= pos < n and self.roles[pos] in ("masked", "drafted"):
                    self.roles[pos], self.texts[pos] = "drafted", txt
                self._draft_p[pos] = p
                self._row_of[pos] = len(self.detail)
                self.detail.append([pos, txt, _f(p), "", "", "drafted"])
            return
        if s.kind in PASS_KINDS:
            return
        for pos, txt, p, q in zip(s.positions, s.texts, _pad(s.p, s.positions), _pad(s.q, s.positions)):
            if not 0 <= pos < n:
                continue
            if s.kind == StepKind.REJECT:
                self.rejected[pos] = txt
                self.roles[pos], self.texts[pos] = "rejected", txt
                self._row(pos, txt, p, q, "rejected")
                continue
            role = KIND_ROLE.get(s.kind)
            if role is None:
                continue
            if self.roles[pos] not in KIND_ROLE.values():
                self.decided += 1
            self.roles[pos], self.texts[pos] = role, txt
            if s.kind == StepKind.ACCEPT:
                self._row(pos, txt, p, q, "accepted" + (f" ({s.note})" if s.note else ""))
            else:
                self.detail.append([pos, txt, _f(p), _f(q), "", role])

    def _row(self, pos: int, txt: str, p, q, outcome: str) -> None:
        if p is None:
            p = self._draft_p.get(pos)
        acc = "" if (p is None or q is None or p <= 0) else f"{min(1.0, q / p):.4f}"
        row = [pos, txt, _f(p), _f(q), acc, outcome]
        if pos in self._row_of and self.detail[self._row_of[pos]][1] == txt:
            self.detail[self._row_of[pos]] = row
        else:
            self.detail.append(row)

    # -- read-outs
    @property
    def tokens_per_call(self) -> float | None:
        return self.decided / self.calls if self.calls else None

    def counters(self) -> dict:
        return {
            "calls": self.calls,
            "rounds": self.round + 1,
            "decided": self.decided,
            "masked": len(self.masked),
            "tokens_per_call": self.tokens_per_call,
            "seconds": self.elapsed,
        }


def _f(x) -> str:
    return "" if x is None else f"{x:.4f}"


def _pad(xs: list, like: list) -> list:
    return list(xs) + [None] * (len(like) - len(xs))


def fold(token_texts: list[str], masked: list[int], steps: list[Step], upto: int | None = None) -> TraceState:
    st = TraceState(list(token_texts), list(masked))
    for s in steps[: len(steps) if upto is None else upto]:
        st.apply(s)
    return st


def legend_html() -> str:
    items = "".join(
        f'<span class="tv-tok tv-{role}" title="{esc(desc)}">{esc(label)}</span>'
        for role, (label, _, _, desc) in ROLES.items()
    )
    return f'<div class="tv-legend">{items}</div>'


def tokens_html(st: TraceState, title: str = "") -> str:
    parts = []
    for i, (role, txt) in enumerate(zip(st.roles, st.texts)):
        if i in st.rejected and role != "rejected":
            parts.append(
                f'<span class="tv-tok tv-rejected tv-rej" data-pos="{i}" data-role="rejected"'
                f' title="rejected draft at {i}">{esc(show_token(st.rejected[i]))}</span>'
            )
        cls = f"tv-tok tv-{role}" + (" tv-rej" if role == "rejected" else "")
        tip = f"position {i}: {role}"
        parts.append(
            f'<span class="{cls}" data-pos="{i}" data-role="{role}" title="{esc(tip)}">'
            f"{esc(show_token(txt))}</span>"
        )
    head = f'<div class="tv-title">{esc(title)}</div>' if title else ""
    return f'{head}<div class="tv-wrap">{"".join(parts)}</div>'


def view_html(st: TraceState | None, title: str = "", message: str = "") -> str:
    """Legend + coloured tokens (or an escaped message when there is nothing to show)."""
    if st is None:
        body = f'<div class="tv-wrap">{esc(message or "Nothing to show yet.")}</div>'
        return legend_html() + body
    return legend_html() + tokens_html(st, title)


def counters_md(st: TraceState | None, status: str = "") -> str:
    if st is None:
        return status
    c = st.counters()
    tpc = "–" if c["tokens_per_call"] is None else f"{c['tokens_per_call']:.2f}"
    line = (
        f"**calls** {c['calls']:g} · **rounds** {c['rounds']} · **tokens** {c['decided']}/{c['masked']}"
        f" · **tokens/call** {tpc} · **seconds** {c['seconds']:.2f}"
    )
    return line + (f" · {status}" if status else "")
