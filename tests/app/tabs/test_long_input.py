"""A paste longer than the studio takes gets the same clear line as an input just over the limit,
whatever its size: the page sends a stand-in that says its length instead of the text (the request
bound would refuse the text before any handler could say why), every page event that sends the
input uses it, and the input box's change does not send the text twice."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from app.run import inputs
from app.serving.limits import DEFAULT_MAX_BODY_BYTES
from app.tabs import editor, freshness
from app.tabs.long_input import guard_js
from engine.errors import InfillError

LINE = "150,007 characters: the studio takes at most 20,000"


def stand_in(n: int) -> str:
    return f"\x00too long: {n} characters"


def test_the_stand_in_gets_the_same_clear_message_everywhere():
    assert LINE in editor.input_info(stand_in(150_007), None, "text")
    assert freshness.input_problem({"text": stand_in(150_007), "model": None, "domain": "text"})
    with pytest.raises(InfillError, match="150,007 characters long; the studio takes at most 20,000"):
        inputs.check_text(stand_in(150_007))
    # Mask selection refuses it without writing the stand-in into the box (nothing typed is lost)
    said = editor.mask_selection(stand_in(150_007), 0, 4, None, "text")
    assert "text" not in said and "150,007" in said["status"]
    # the same words as typed text: a short "stand-in" is just text
    assert inputs.typed_length(stand_in(5)) == len(stand_in(5))


@pytest.mark.skipif(shutil.which("node") is None, reason="needs node to run the page's script")
def test_the_pages_script_sends_a_stand_in_only_for_a_too_long_input():
    script = f"""
    const guard = {guard_js("(a, b) => [a, b]")};
    (async () => {{
      const long = 'x'.repeat(150000) + ' [MASK]', emoji = '\\u{{1F389}}'.repeat(20000);
      const out = [await guard(long, 'text-asarm'), await guard(emoji, 'x'), await guard('short', 7)];
      console.log(JSON.stringify(out.map(r => r.map(v => typeof v === 'string' ? v.slice(0, 40) : v))));
    }})();"""
    out = json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True).stdout)
    assert out[0] == [stand_in(150_007), "text-asarm"]
    assert inputs.typed_length(out[0][0]) == 150_007
    assert out[1][0].startswith("\U0001F389")  # 20,000 emoji are 20,000 characters, as Python counts: sent
    assert out[2] == ["short", 7]


@pytest.fixture(scope="module")
def demo():
    from app import create

    return create()


def test_every_page_event_that_sends_the_input_sends_the_stand_in(demo):
    text = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "infill-text")
    sending = [f for f in demo.fns.values() if any(c._id == text._id for c in f.inputs)]
    page = [f for f in sending if f.api_name != "infill"]  # /infill: the API's, no page event triggers it
    assert {f.name for f in page} >= {"input_info", "mask_selection", "show_tokens", "run_page", "run_compare",
                                      "clear_fixed_error"}
    for f in page:
        assert f.js and "too long: " in f.js, f.name
        # a change of the box sends its value again as the event's data: twice the text
        assert not any(t[0] == text._id and t[1] == "change" for t in f.targets), f.name


def test_the_bound_holds_the_largest_request_of_a_20000_character_input():
    """The longest allowed input, in the costliest JSON escaping (a surrogate pair, 12 bytes a
    character), fits the request bound with room for the form's other values."""
    body = json.dumps({"data": ["\U0001F389" * inputs.MAX_INPUT_CHARS, *[""] * 14], "event_data": None,
                       "fn_index": 99, "trigger_id": 99, "session_hash": "x" * 11})
    assert len(body.encode()) < DEFAULT_MAX_BODY_BYTES - 4096
