"""Issue 25 without a browser: one-line code masks (parsed and enforced through the one constraint
every sampler reads), the page's plain words (knob sentences, diffusion call notes, model switch
note, Statistics knobs), refused and hinted inputs, the play pace in decided tokens, the Watch
pace, the honest speed line and the hover text of untested first drafts."""

from __future__ import annotations

import string

import pytest
import torch

from engine.errors import BadParameterError
from engine.inputs.masking import parse_masked_text
from engine.inputs.tokenization import Codec, char_tokenizer

CODEC = Codec(char_tokenizer(string.printable))
CODE = "def f(x):\n    [MASK]\n    return [MASK]\n[MASK:4]\n"


@pytest.fixture()
def tiny(tmp_path, monkeypatch):
    """Only tiny random models listed (text and protein, character vocabularies), a fresh store."""
    from app.stored import store as app_store
    from engine.loading import folders as model_folders
    from tools.tiny_models import make_tiny_models

    make_tiny_models(tmp_path / "models")
    monkeypatch.setenv("INFILL_MODEL_DIRS", str(tmp_path / "models"))
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'studio.db'}")
    monkeypatch.setattr(model_folders, "ASSETS", tmp_path / "no-bundled-models")
    monkeypatch.setattr(app_store, "_store", None)
    yield tmp_path
    app_store._store = None


def test_a_bare_mask_alone_on_its_line_is_a_one_line_span():
    mi = parse_masked_text(CODE, CODEC, max_tokens=128, default_span=8, line_masks=True)
    first = mi.span_ranges[0]
    assert mi.line_positions == list(range(*first)), "only the bare [MASK] alone on its line"
    assert mi.has_newline is not None and bool(mi.has_newline[CODEC.encode("\n")[0]])
    plain = parse_masked_text(CODE, CODEC, max_tokens=128, default_span=8)
    assert plain.line_positions == [] and plain.has_newline is None


def test_one_line_spans_never_take_a_line_break():
    mi = parse_masked_text(CODE, CODEC, max_tokens=128, default_span=8, line_masks=True)
    nl = CODEC.encode("\n")[0]
    positions = [mi.line_positions[0], mi.span_ranges[1][0]]
    out = mi.constrain(torch.zeros(2, CODEC.vocab_size), positions)
    assert out[0, nl] == float("-inf") and out[1, nl] == 0.0  # the inline span may break lines
    assert torch.isfinite(out[0]).sum() == CODEC.vocab_size - int(mi.has_newline.sum())


def test_a_run_fills_a_code_line_without_a_line_break(tiny):
    """Every sampler's distributions go through MaskedInput.constrain: the tiny model (which may
    write '\\n' anywhere) fills the line span without one, for several seeds and samplers."""
    from engine.api import InfillRun

    model = str(tiny / "models" / "text-asarm")
    mi = parse_masked_text(CODE, CODEC, max_tokens=128, default_span=8, line_masks=True)
    for sampler in ("assd-cache", "sequential-cache", "assd-pipelined"):
        for seed in range(6):
            run = InfillRun(masked_input=mi, model=model, sampler=sampler, seed=seed)
            for _ in run.stream():
                pass
            res = run.result(with_log_prob=False)
            line = res.text.split("\n")[1]
            assert res.text.count("\n") >= 4 and len(line) >= 4 + 8 - 1, repr(res.text)
            assert res.text.startswith("def f(x):\n   "), repr(res.text)


def test_each_knob_has_one_plain_sentence_and_diffusion_says_why_calls_exceed_tokens():
    from app import choices
    from app.run import form
    from engine.samplers import DEFAULT_SAMPLERS

    for name, text in form.PARAM_HELP.items():
        assert text.count(". ") == 0 and len(text.split()) >= 6, name
    for name in ("mdm", "self-spec", "assd-diffusion"):
        assert "exceed the tokens" in choices.sampler_help(name), name
    assert "exceed" not in choices.sampler_help("assd-cache")
    d = DEFAULT_SAMPLERS["text"]  # its ratio in the page's one unit (issue 49)
    r = d.ratio
    assert (f"{r:.2f}x faster" if r >= 1 else f"{1 / r:.2f}x slower") in choices.sampler_help(d.sampler, "text")


def test_switching_to_a_sampler_of_another_model_says_so_and_why():
    from app import choices

    note = choices.switch_note("self-spec", "text-asarm", "text-hybrid")
    assert "text-asarm" in note and "text-hybrid" in note and "hybrid model" in note
    assert choices.switch_note("assd", "text-asarm", "text-asarm") == ""


def test_statistics_names_only_the_knobs_a_sampler_reads():
    from types import SimpleNamespace

    from app import choices
    from app.views import plots

    stored = {"k": 5, "steps": 32, "temperature": 1.0, "cache": False, "model": "text-hybrid"}
    assert choices.shown_params("mdm", stored) == {"steps": 32, "temperature": 1.0}
    label = plots._label(SimpleNamespace(sampler="mdm", model="text-hybrid", params=stored))
    assert "k=" not in label and "steps=32" in label
    assert "k=5" in plots._label(SimpleNamespace(sampler="assd", model="m", params={"k": 5, "temperature": 1.0}))


def _form(**kw):
    from app.examples import EXAMPLES
    from app.run.form import Form

    base = dict(domain="text", model=None, text=EXAMPLES["text"][0], sampler="assd-cache", seed="0")
    base.update(kw)
    return Form(**base)


def test_refused_values_say_what_and_the_seed_range_is_what_is_accepted(tiny):
    from app.run import form

    with pytest.raises(BadParameterError, match="0.05 to 10"):  # the engine's range (issue 23: one range)
        form.prepare(_form(temperature=11))
    with pytest.raises(BadParameterError, match="1 to 64"):
        form.prepare(_form(k=100))
    with pytest.raises(BadParameterError, match="18446744073709551615"):
        form.prepare(_form(seed="-3"))
    form.prepare(_form(k=5, sampler="sequential-cache"))  # k is hidden for it, and ignored
    with pytest.raises(BadParameterError, match="does not read k"):  # but not out of its range (issue 48)
        form.prepare(_form(k=100, sampler="sequential-cache"))
    assert form.prepare(_form(seed="18446744073709551615")).seed == 2**64 - 1
    with pytest.raises(BadParameterError, match=r"write \[MASK\]"):
        form.prepare(_form(text="the [mask] sat"))
    assert "[MASK:3]" in form.mask_hint("a [Mask:3] b") and form.mask_hint("a [MASK] b") == ""


def _tiny_trace(tiny, text="ab[MASK:20]cd", sampler="assd-cache"):
    from app.run import streaming

    live = streaming.start(_form(text=text, sampler=sampler, seed="4"))
    for _ in streaming.rounds(live):
        pass
    return live


def test_play_speed_counts_decided_tokens(tiny):
    """At "N tokens/s" a trace takes (decided tokens) / N seconds: drafts, rejections and passes
    add no time (the old pace counted every drafted position and ran 3-4x slow)."""
    from app.tabs import playback, watch

    live = _tiny_trace(tiny)
    total = sum(playback._delay(live.steps, j, "10 tokens/s") for j in range(len(live.steps)))
    assert total == pytest.approx(20 / 10)
    assert watch.watch_rate(12) == watch.WATCH_RATE and watch.watch_rate(243) == pytest.approx(24.3)


def test_paced_frames_show_drafts_before_their_decisions(tiny):
    from app.tabs import playback

    live = _tiny_trace(tiny)
    roles = [set(st.roles) for _, st in playback.paced(live.view, live.steps, 0, 20.0)]
    assert any("drafted" in r for r in roles[:-1]), "a frame with the round's drafts on screen"
    assert "masked" not in roles[-1]
    stopped = list(playback.paced(live.view, live.steps, 0, 1.0, stop=lambda: True))
    assert stopped == [], "skip to end stops the pace at once"


def test_speed_line_too_short_to_time_and_median_of_pairs(tiny, monkeypatch):
    from app.timing import speedup

    line = speedup.speedup_line(_tiny_trace(tiny, "ab[MASK:2]cd"))
    assert "too short to time" in line and "2 masked tokens" in line and "x," not in line
    monkeypatch.setattr(speedup, "MIN_TIMED_TOKENS", 0)
    line = speedup.speedup_line(_tiny_trace(tiny, "ab[MASK:2]cd"))
    assert "too short to time" in line and "took" in line and "x," not in line  # under 50 ms of work
    assert speedup.speed_ratio([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == (1.0, 0.5, 1.5)
    monkeypatch.setattr(speedup, "MIN_TIMED_SECONDS", 0.0)
    line = speedup.speedup_line(_tiny_trace(tiny, "ab[MASK:20]cd"))
    assert "median of" in line and "alternating pairs" in line and "range" in line and "on this server" in line
    monkeypatch.setenv("INFILL_SPEEDUP_SECONDS", "0")  # a long run: one pair, and the line says why
    line = speedup.speedup_line(_tiny_trace(tiny, "ab[MASK:20]cd"))
    assert "one pair" in line and "range" not in line


def test_hover_of_an_untested_first_draft_says_no_test_ran(tiny):
    from app.views import token_views
    from app.views.render import _tip

    live = _tiny_trace(tiny)
    st = token_views.new_state(live.view, live.steps)
    untested = [s.positions[0] for s in live.steps if s.kind.value == "accept" and not s.tested]
    tested = [s.positions[0] for s in live.steps if s.kind.value == "accept" and s.tested]
    assert untested and tested
    assert "without a test" in _tip(st, untested[0], "accepted") and "tested by" not in _tip(st, untested[0], "accepted")
    assert "tested by the speculative test" in _tip(st, tested[0], "accepted")


def test_the_sampler_switch_names_the_new_model_and_hides_ignored_knobs(monkeypatch):
    """Picking self-spec on text-asarm: the model list switches to the hybrid, the status says so and
    why, and only self-spec's own knobs stay visible (k hides)."""
    from app import choices
    from app.tabs import editor
    from app.tabs.common import PARAMS

    monkeypatch.setattr(choices, "list_models", lambda domain=None, kind=None:
                        ["text-hybrid"] if kind == "hybrid" else ["text-asarm"])
    upd = editor.on_sampler("self-spec", "text", "text-asarm")
    assert upd["model"]["value"] == "text-hybrid"
    assert "text-asarm to text-hybrid" in upd["status"] and "because" in upd["status"]
    shown = {p for p in PARAMS if upd[p]["visible"]}
    assert shown == {"temperature", "dtau", "window", "inner"}
    kept = editor.on_sampler("assd", "text", "text-asarm")
    assert "status" not in kept, "no word (and the status kept) when the model stays"
    assert kept["model"]["value"] == "text-asarm"


def test_a_slow_start_says_the_model_is_loading(tiny, monkeypatch):
    """A run whose preparation (input checks, model load) takes a while shows "Preparing" first; a
    quick refusal comes back as the first frame, with nothing before it."""
    import time as _time

    from app.run import streaming
    from app.tabs import player

    fast = streaming.start
    monkeypatch.setattr(streaming, "start", lambda *a, **kw: (_time.sleep(player.PREPARE_NOTICE + 0.4), fast(*a, **kw))[1])
    frames = player.run_infill("text", None, "ab[MASK:3]cd", "assd-cache", 5, 1.0, "0", 32, 0.05, "cosine", 1)
    assert "loading the model" in next(frames)["status"]
    assert any("Done" in f["status"] for f in frames)
    # the page says it at Run's click (STARTING), so its stream sends no notice that could land after Stop's answer
    from app.tabs.common import STARTING

    page = list(player.run_page("text", None, "ab[MASK:3]cd", "assd-cache", 5, 1.0, "0", 32, 0.05, "cosine", 1, False))
    assert "to load" in STARTING and not any("Preparing" in f.get("status", "") for f in page)
    assert "Done" in page[-1]["status"]
    monkeypatch.setattr(streaming, "start", fast)
    first = next(player.run_infill("text", None, "ab[MASK:3]cd", "assd-cache", 5, 1.0, "-1", 32, 0.05, "cosine", 1))
    assert "seed" in first["status"]


def test_a_run_from_the_page_reads_its_input_through_the_normaliser_once(tiny, monkeypatch):
    """The run reads the text through its domain's normaliser once, on the engine's path (the API's and
    the CLI's too: engine.run_setup.parse_for; prepare() keeps its note in Form.note); the player shows
    that note and does not normalise again."""
    from app.tabs import player
    from engine import run_setup

    calls = []
    real = run_setup.normalise
    monkeypatch.setattr(run_setup, "normalise", lambda d, t: (calls.append(t), real(d, t))[1])
    text = ">sp|P1 a header\nMKTAYIAKQR[MASK:4]QISFVKSHFSRQ"
    frames = list(player.run_infill("protein", None, text, "assd-cache", 2, 1.0, "0", 32, 0.05, "cosine", 1))
    assert calls == [text]
    assert "Read as a protein sequence" in frames[-1]["status"], frames[-1]["status"]
