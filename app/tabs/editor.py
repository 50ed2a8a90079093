"""The editor above the tabs: domain, model, sampler and example pickers, the input with its live
token count, Mask selection, the clickable token view, the sampler parameters and the model card.
Every check happens before anyone presses Run, with a message that says what is wrong."""

from __future__ import annotations

import gradio as gr

from app import choices
from app.examples import DOMAINS, EXAMPLES
from app.run import form, inputs
from app.views import cards
from app.views.textmap import bytes_fn, char_pieces
from engine.api import parse_for
from engine.errors import InfillError
from engine.inputs.domains import line_masks
from engine.inputs.masking import from_token_positions
from engine.loading.registry import load
from engine.params import KNOBS, SEED
from engine.samplers import SAMPLERS, default_sampler

from . import sampler_list
from .common import PARAMS, Page, components, guarded, named, status_md
from .long_input import guard_js

MASK_SELECTION_JS = """
(text, a, b, model, domain) => {
  const el = document.querySelector('#infill-text textarea');
  if (el) { a = el.selectionStart; b = el.selectionEnd; }
  return [text, a, b, model, domain];
}
"""


def models_for(domain: str, sampler: str, current: str | None = None) -> dict:
    """The model dropdown for this domain and sampler (keeping `current` when it fits), and the
    status only when no model fits (a message saying so; otherwise the status keeps its line)."""
    kind = choices.sampler_kind(sampler)
    names = choices.list_models(domain, kind)
    value = current if current in names else (names[0] if names else None)
    upd = {"model": gr.update(choices=names, value=value)}
    return upd if names else {**upd, "status": status_md(choices.no_model_message(domain, kind), "error")}


def models_b(domain: str, sampler_b: str, model_b: str | None) -> dict:
    """Compare's B model list, following the domain and sampler B (the editor's status is A's)."""
    return {"model_b": models_for(domain, sampler_b, model_b)["model"]}


def on_domain(domain, sampler, model) -> dict:
    """A domain change: its models, its examples (the box shows the first, which the input holds
    after a person's switch), and a message when it has no model."""
    ex = EXAMPLES.get(domain, [])
    return {**models_for(domain, sampler, model), "example": gr.update(choices=ex, value=ex[0] if ex else None)}


def domain_example(domain) -> dict:
    """A person switching domain gets that domain's first example in the input box (never English
    text sent to the protein model) and that domain's default sampler."""
    ex = EXAMPLES.get(domain, [])
    sampler = default_sampler(domain)
    return {**({"text": ex[0]} if ex else {}), "sampler": sampler,
            "sampler_help": choices.sampler_help(sampler, domain)}


def model_card(model):
    """The selected model's card (size, training budget, measured quality) under the editor."""
    return cards.card_markdown(model)


def input_info(text, model, domain):
    """The live line under the input: tokens against the model's limit, masked tokens, what the
    protein normaliser will change, or what is wrong, before anyone presses Run."""
    text = text if isinstance(text, str) else ""
    n_chars = inputs.typed_length(text)  # a long paste arrives as its stand-in (app.tabs.long_input)
    if n_chars > inputs.MAX_INPUT_CHARS:
        return status_md(f"{n_chars:,} characters: the studio takes at most {inputs.MAX_INPUT_CHARS:,}. "
                         "Shorten the input; nothing is cut silently.", "error")
    try:
        inputs.check_sentinels(text)
        text, note = inputs.normalize(domain, text)
        lm = codec_for(model, domain)
        limit = lm.max_tokens
        if not text.strip():
            return f"**0 / {limit} tokens** ({lm.name}'s limit). " + inputs.mask_units(domain, lm.codec)
        hint = form.mask_hint(text)
        if "[MASK" in text:
            mi = parse_for(text, lm)
            n, masked, spans = len(mi.tokens), len(mi.masked), len(mi.span_ranges)
            line = (f"**{n} / {limit} tokens** ({lm.name}'s limit), {masked} of them masked in {spans} span"
                    + ("s" if spans != 1 else "") + ". " + inputs.word_masks(text, lm.codec) + " "
                    + inputs.mask_units(domain, lm.codec))
        else:
            n = len(lm.codec.encode(text))
            line = (f"**{n} / {limit} tokens** ({lm.name}'s limit). Nothing is masked yet. "
                    + (f"{hint} " if hint else "") + inputs.mask_units(domain, lm.codec))
            if n > limit:
                return status_md(f"{n} tokens: this model takes at most {limit}.", "error")
    except InfillError as e:
        return status_md(str(e), "error")
    if line_masks(domain):  # a bare [MASK] alone on a line is the whole line (engine/inputs/domains.py)
        line += " " + CODE_LINE_HELP
    return line + (f" {note}" if note else "")


CODE_LINE_HELP = "A [MASK] alone on a line fills that one line, after its indentation (no line break inside)."


def on_sampler(sampler, domain, model):
    """A sampler change: the models that fit it, its help line, only its own parameters shown, and
    a sentence saying so when the sampler needs another model (the model never changes silently).
    Updated by name: the model, the help line, the status and each knob in PARAMS."""
    found = models_for(domain, sampler, model)
    note = choices.switch_note(sampler, model, found["model"].get("value"))
    if note and "status" not in found:  # a model fits: say when it is another one
        found["status"] = status_md(note, "info")
    spec = SAMPLERS.get(sampler)
    listed = set(spec.reads) if spec else set()
    return {**found, "sampler_help": choices.sampler_help(sampler, domain),
            **{p: gr.update(visible=p in listed) for p in PARAMS}}


def codec_for(model: str | None, domain: str):
    """The loaded model (for its tokenizer and limit): the one picked, else the domain's first."""
    names = choices.list_models(domain)
    if not names:
        raise InfillError(choices.no_model_message(domain, "any"))
    name = model if model in names else names[0]
    return load(name, allow_paths=False)


def mask_selection(text, a, b, model, domain) -> dict:
    """Replace the selected characters with [MASK:n], n = their length in the model's tokens (the
    text and the status, by name)."""
    text = text or ""
    try:
        inputs.check_text(text)
    except InfillError as e:  # the text back as it came, never a long input's stand-in (the box keeps it)
        kept = {} if inputs.typed_length(text) != len(text) else {"text": text}
        return {**kept, "status": status_md(str(e), "error")}
    try:
        a, b = int(a or 0), int(b or 0)
    except (TypeError, ValueError):
        a = b = 0
    a, b = max(0, min(a, len(text))), max(0, min(b, len(text)))
    if b <= a:
        return {"text": text, "status": status_md("Select some text in the input first, then press Mask selection.", "error")}
    try:
        lm = codec_for(model, domain)
        n = len(lm.codec.encode(text[a:b]))
    except InfillError as e:
        return {"text": text, "status": status_md(str(e), "error")}
    return {"text": text[:a] + f"[MASK:{max(n, 1)}]" + text[b:],
            "status": status_md(f"Masked {b - a} characters ({n} tokens).", "ok")}


def _tok_label(s: str) -> str:
    return s.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥") or "∅"


def _tokens_of(text: str, lm) -> tuple[list[int], list[int]]:
    """The input's token ids and its masked positions (InfillError when empty or too long)."""
    if "[MASK" in text:
        mi = parse_for(text, lm)
        return list(mi.tokens), list(mi.masked)
    if not text.strip():
        raise InfillError("The input is empty: type some text first.")
    ids = lm.codec.encode(text)
    if len(ids) > lm.max_tokens:
        raise InfillError(f"The input is {len(ids)} tokens long; this model takes at most {lm.max_tokens}.")
    return ids, []


def show_tokens(text, model, domain) -> dict:
    """The clickable token view: one checkbox per token, checked = masked (the view, its state and
    the status, by name)."""
    try:
        inputs.check_text(text or "")
        lm = codec_for(model, domain)
        ids, masked = _tokens_of(text or "", lm)
    except InfillError as e:
        return {"tok_view": gr.update(choices=[], value=[]), "tok_state": None, "status": status_md(str(e), "error")}
    ms = set(masked)
    pieces = char_pieces([None if i in ms else t for i, t in enumerate(ids)], bytes_fn(lm.codec))
    # a token that only continues the character on its left shows the dotted circle
    choices = [("▁" if i in ms else (_tok_label(pieces[i]) if pieces[i] else "◌"), i) for i in range(len(ids))]
    state = {"model": lm.name, "ids": ids, "mask_id": lm.codec.mask_id}
    return {"tok_view": gr.update(choices=choices, value=masked, visible=True), "tok_state": state,
            "status": status_md("Click tokens to mask or unmask them; the input box follows.", "info")}


@guarded
def toggle_tokens(selected, tok_state) -> dict:
    """Rebuild the input text from the token view's checked (masked) positions, with the engine's
    one token-masking function (masks widen to whole characters, so the rest stays byte-identical):
    the text and the status, by name."""
    if not tok_state:
        return {"status": status_md("Press Show tokens first.", "error")}
    lm = load(tok_state["model"], allow_paths=False)
    ids, mask_id = tok_state["ids"], tok_state["mask_id"]
    sel = sorted({int(i) for i in (selected or [])} | {i for i, t in enumerate(ids) if t == mask_id})
    if not sel:
        return {"text": lm.codec.decode(ids), "status": ""}
    mi = from_token_positions(ids, sel, lm.codec, max_tokens=len(ids))
    widened = len(mi.masked) > len(sel)
    return {"text": mi.source, "status": status_md("Masks widened to whole characters.", "info") if widened else ""}


# ----------------------------------------------------------------------------- layout


def layout(p: Page) -> None:
    """The title, the pickers, the input, the buttons, the status line, the card and the token view."""
    p.sampler_names = list(SAMPLERS)
    p.first_domain = DOMAINS[0]
    p.first_sampler = default_sampler(p.first_domain)
    p.init_models = choices.list_models(p.first_domain, choices.sampler_kind(p.first_sampler))
    first_model = p.init_models[0] if p.init_models else None
    gr.Markdown("# Infilling studio\nMask spans of text, code or protein; watch speculative samplers fill them.")
    with gr.Row():
        p.domain = gr.Radio(DOMAINS, value=p.first_domain, label="Domain", scale=1, elem_id="domain")
        p.model = gr.Dropdown(p.init_models, value=first_model, label="Model", scale=1, allow_custom_value=True)
        p.sampler = gr.Dropdown(p.sampler_names, value=p.first_sampler, elem_id="sampler",
                                label="Sampler", scale=1, allow_custom_value=True)
        p.example = gr.Dropdown(EXAMPLES[p.first_domain], value=EXAMPLES[p.first_domain][0], label="Examples",
                                scale=2, elem_id="examples")
    sampler_list.layout(p)  # one line per sampler, beside the list
    # no max_length: the browser would cut a long paste silently; the count line and Run say why instead
    p.text = gr.Textbox(EXAMPLES[p.first_domain][0], lines=3, max_lines=8,
                        label="Input: mark spans with [MASK], [MASK:n] (tokens) or [MASK:nw] (words)",
                        elem_id="infill-text")
    p.tok_count = gr.Markdown(input_info(EXAMPLES[p.first_domain][0], first_model, p.first_domain),
                              elem_id="token-count")
    with gr.Row(equal_height=True):
        p.run_btn = gr.Button("Run", variant="primary", elem_id="run", scale=4)
        p.stop_btn = gr.Button("Stop", variant="stop", elem_id="stop", scale=0, size="sm", interactive=False)
        p.mask_btn = gr.Button("Mask selection", size="sm", elem_id="mask-selection", scale=1)
        p.tok_btn = gr.Button("Show tokens (click to mask)", size="sm", elem_id="show-tokens", scale=1)
    p.status = gr.Markdown("", elem_id="status")
    p.card = gr.Markdown(cards.card_markdown(first_model), elem_id="model-card")
    p.tok_view = gr.CheckboxGroup([], label="Tokens: checked = masked", elem_id="token-toggle", visible=False)
    p.sel_a = gr.Number(0, visible=False, precision=0)
    p.sel_b = gr.Number(0, visible=False, precision=0)
    p.tok_state = gr.State(None)
    _parameters(p)


#: a value typed into a knob's number box outside its range is clamped by the browser (Gradio's
#: slider) before the server sees it: say so, next to the knobs, instead of running silently
KNOB_NOTE_JS = """() => {
  if (window.__knobNote) return;
  window.__knobNote = true;
  const say = (e) => {
    const el = e.target;
    if (!(el instanceof HTMLInputElement) || el.type !== 'number') return;
    const box = el.closest('[id^="knob-"]');
    const note = document.querySelector('#knob-note');
    if (!box || !note) return;
    const name = box.id.slice(5);
    const v = parseFloat(el.value), lo = parseFloat(el.min), hi = parseFloat(el.max);
    if (isNaN(lo) || isNaN(hi)) return;
    if (isNaN(v) || (v >= lo && v <= hi)) {
      if (note.textContent.startsWith(name + ':')) note.textContent = '';
      return;
    }
    note.textContent = name + ': ' + el.value + ' is outside ' + lo + ' to ' + hi + ', so it was set to '
      + (v < lo ? lo : hi) + '.';
  };
  document.addEventListener('change', say, true);
  document.addEventListener('blur', say, true);
}"""


def knob_control(name: str, visible: bool, prefix: str = "knob-", start: object = None):
    """A knob's control, all from its table row (engine.params.KNOBS): a slider over the page's range
    with the table's step and start value (`start` where a tab starts elsewhere), or a radio of a choice
    knob's values; its sentence and range as the info line. Its element id is `prefix` + the knob's name
    (the Exactness tab builds its own with another prefix: ids are unique on the page)."""
    k = KNOBS[name]
    value = k.page_default if start is None else start
    if k.choices:
        return gr.Radio(list(k.choices), value=value, label=name, info=k.help,
                        visible=visible, elem_id=f"{prefix}{name}")
    lo, hi = k.page_range  # the row itself (a row added after app.run.form was imported has one too)
    return gr.Slider(lo, hi, value=value, step=k.ui_step, label=name,
                     info=f"{k.help} ({lo:g} to {hi:g})", visible=visible, elem_id=f"{prefix}{name}")


def _parameters(p: Page) -> None:
    """The sampler parameters, each with its range at the control (only the sampler's own shown), in
    `p.knobs` by knob name."""
    listed = set(SAMPLERS[p.first_sampler].reads)
    p.knobs = {}
    with gr.Accordion("Sampler parameters", open=True):
        p.sampler_help = gr.Markdown(choices.sampler_help(p.first_sampler, p.first_domain), elem_id="sampler-help")
        with gr.Row():
            for name in form.FIRST_ROW:  # beside the seed; every other knob of the table on the second row
                p.knobs[name] = knob_control(name, name in listed)
            # a text box: every seed 0 .. 2^64 - 1 is exact (a browser number box is exact only below 2^53)
            p.seed = gr.Textbox(str(SEED.default), label="seed", max_lines=1, elem_id="seed",
                                info=f"{form.PARAM_HELP['seed']}: {form.SEED_HELP_RANGE}.")
        with gr.Row():
            for name in KNOBS:
                if name not in form.FIRST_ROW:
                    p.knobs[name] = knob_control(name, name in listed)
        # the browser clamps a typed value into the slider's range; KNOB_NOTE_JS says when it did
        p.knob_note = gr.HTML("", elem_id="knob-note")


def wire(p: Page) -> None:
    """The editor's events (the compare side's model list follows domain and sampler B too)."""
    p.domain.change(named(p, on_domain), [p.domain, p.sampler, p.model], components(p, ("model", "example", "status")),
                    api_visibility="private", show_progress="hidden")
    # a person switching domain (not a restore) gets that domain's example in the input
    p.domain.input(named(p, domain_example), [p.domain], components(p, ("text", "sampler", "sampler_help")),
                   api_visibility="private")
    p.demo.load(None, None, None, js=KNOB_NOTE_JS, api_visibility="private")
    p.model.change(model_card, [p.model], [p.card], api_visibility="private", queue=False)
    # every event that sends the input sends a stand-in for one over the limit (guard_js); a change
    # of the input box sends its value a second time as the event's data, so the line under it is
    # redrawn in a step chained after the change (`text_changed`), which sends the input once
    p.text_changed = p.text.change(None, None, None, api_visibility="private", queue=False, show_progress="hidden")
    for evt in (p.text_changed.then, p.model.change, p.domain.change):
        evt(input_info, [p.text, p.model, p.domain], [p.tok_count], api_visibility="private",
            trigger_mode="always_last", show_progress="hidden", js=guard_js())
    p.sampler.change(named(p, on_sampler), [p.sampler, p.domain, p.model],
                     components(p, ("model", "sampler_help", "status", *PARAMS)), api_visibility="private")
    for src in (p.domain, p.sampler_b):
        src.change(named(p, models_b), [p.domain, p.sampler_b, p.model_b], [p.model_b],
                   api_visibility="private")
    p.example.input(lambda e: e or gr.update(), [p.example], [p.text], api_visibility="private")
    p.mask_btn.click(named(p, mask_selection), [p.text, p.sel_a, p.sel_b, p.model, p.domain], components(p, ("text", "status")),
                     js=guard_js(MASK_SELECTION_JS), api_name="mask_selection")
    p.tok_btn.click(named(p, show_tokens), [p.text, p.model, p.domain], components(p, ("tok_view", "tok_state", "status")),
                    api_name="show_tokens", js=guard_js())
    p.tok_view.input(named(p, toggle_tokens), [p.tok_view, p.tok_state], components(p, ("text", "status")),
                     api_name="toggle_tokens", trigger_mode="always_last")
