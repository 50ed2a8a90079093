"""An input longer than the studio takes never travels to the server: the page sends a short
stand-in that says how long it is (app.run.inputs.TOO_LONG_RE), and the handlers answer with the
same "N characters: the studio takes at most 20,000" as for an input just over the limit.

Why in the browser: the request bound (app.serving.limits, 256 KiB) refuses a long paste's request
before any handler runs, so the page showed Gradio's raw "Request body too large" toast, once per
event, and the line under the input kept the previous text's count. Why not the textbox's
`max_length`: the browser would cut a paste to 20,000 characters silently, and bad input loses
nothing. The box keeps everything typed; only what is sent is replaced."""

from __future__ import annotations

from app.run.inputs import MAX_INPUT_CHARS

#: a value over the limit, counted in code points (as Python's len counts: an emoji is one), becomes
#: the stand-in; anything else passes unchanged
_STAND_IN = f"""(v) => {{
  if (typeof v !== 'string' || v.length <= {MAX_INPUT_CHARS}) return v;
  let n = 0;
  for (const _ of v) n++;
  return n > {MAX_INPUT_CHARS} ? '\\u0000too long: ' + n + ' characters' : v;
}}"""


def guard_js(js: str | None = None) -> str:
    """An event's `js`: its own `js` first (which returns the inputs as a list), then every input
    longer than the studio takes replaced by its stand-in."""
    first = f"await ({js})(...args)" if js else "args"
    return f"""async (...args) => {{
  const out = {first};
  return (Array.isArray(out) ? out : [out]).map({_STAND_IN});
}}"""
