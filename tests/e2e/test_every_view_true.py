"""Every view true (issue 49), in Debian's Chromium at 1366x768: Stop at any moment of a run leaves
every view agreeing with what was stored; a run that stored nothing leaves nothing of itself, and
nothing of the run before it is shown as current. Tiny random models in an app of their own (this
process, so a test can hold a run at a chosen moment); every wait is on page state, never on time.
Screenshots go to test-artifacts/<test>/."""

from __future__ import annotations

import pytest

from tests.e2e.test_browser import ARTIFACTS, launched_chromium, need_browser, tiny_studio
from tests.e2e.test_browser import open_page as _page
from tests.e2e.test_browser import shot as _shot
from tests.e2e.test_browser import wait_text as _wait_text
from tests.support.hold import hold

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def url(tmp_path_factory):
    need_browser()
    with tiny_studio(tmp_path_factory.mktemp("page49"), watch="0") as u:
        yield u


@pytest.fixture(scope="module")
def chromium(url):
    yield from launched_chromium()


def _scrub(page) -> tuple[int, int]:
    v, m = page.eval_on_selector("#scrub input[type=range]", "e => [e.value, e.max]")
    return int(float(v)), int(float(m))


def _link(page) -> str:
    return page.input_value("#share-link textarea, #share-link input")


def _full_run(page, text="x[MASK:20]y") -> None:
    page.fill("#infill-text textarea", text)
    page.click("#run")
    _wait_text(page, "#status", "Done")
    page.wait_for_function("!document.querySelector('#run').disabled", timeout=30_000)
    assert "?s=" in _link(page) and _scrub(page)[1] > 1


def _nothing_of_a_run(page) -> None:
    """Every view of the player is empty: no counters, no tokens, no link, no completed text, the
    scrubber at 0 of at most 1, the round table empty."""
    assert page.inner_text("#counters [data-testid=markdown]").strip() == ""
    assert page.query_selector("#player [data-role]") is None, page.inner_text("#player")
    assert _link(page) == ""
    assert page.input_value("#completed textarea") == ""
    assert _scrub(page) in ((0, 1), (0, 0))


def _hold(monkeypatch, where: str):
    """Hold the next run at `where` ("first-round": its first network pass; "prepare": while the
    run is checked and its model loaded) until the returned event is set."""
    from app.run import streaming
    from app.serving import slots as slots_mod

    if where == "first-round":
        return hold(monkeypatch, slots_mod.Turns, "preempt")
    return hold(monkeypatch, streaming, "start")


@pytest.mark.parametrize("where", ["first-round", "prepare"])
def test_stop_before_the_first_round_leaves_nothing_of_either_run(chromium, url, request, monkeypatch, where):
    """A stored run is on screen; Run, then Stop while the next run computes its first round (or is
    still being prepared): the status says it stopped and stored nothing, and stays so; nothing of
    the previous run is shown as current; the next Run ends Done with no Stop message."""
    monkeypatch.setenv("INFILL_SPEEDUP", "0")  # no timing reruns after the first run: the hold is the next run's
    page = _page(chromium, url)
    _full_run(page)
    reached, release = _hold(monkeypatch, where)
    if where == "prepare":  # past the moment a "Preparing" notice would be due (the API's), nothing lands after Stop
        from app.tabs import player
        monkeypatch.setattr(player, "PREPARE_NOTICE", 2.0)
    try:
        page.click("#run")
        assert reached.wait(30)
        if where == "first-round":  # the run's id has reached the page
            _wait_text(page, "#status", "computing the first round")
        page.wait_for_function("!document.querySelector('#stop').disabled", timeout=10_000)
        page.click("#stop")
        _wait_text(page, "#status", "Stopped before the first round")
        if where == "prepare":
            page.wait_for_timeout(2500)  # past the notice's moment, the run still held
            assert "Stopped before the first round" in page.inner_text("#status"), page.inner_text("#status")
    finally:
        release.set()
    monkeypatch.undo()
    monkeypatch.setenv("INFILL_SPEEDUP", "0")
    page.wait_for_function("!document.querySelector('#run').disabled", timeout=30_000)
    # whatever the run does once released, nothing of it reaches the page: the status stays
    page.wait_for_timeout(1500)  # a late frame would land in this window (this reads state, not a timing)
    assert "Stopped before the first round" in page.inner_text("#status"), page.inner_text("#status")
    assert "Running" not in page.inner_text("#status")
    _shot(page, request, "after-stop")
    page.screenshot(path=str(ARTIFACTS / request.node.name / "after-stop-full.png"), full_page=True)
    _nothing_of_a_run(page)
    assert page.eval_on_selector("#stop", "e => e.disabled")
    _shot(page, request, "after-stop")
    # the next run is a run of its own: Done, no Stop message left over
    page.click("#run")
    _wait_text(page, "#status", "Done")
    assert "Stopped" not in page.inner_text("#status")
    assert "?s=" in _link(page)
    page.close()


def test_exactness_checks_the_model_in_view_and_refuses_a_one_token_span(chromium, url, request):
    """After a domain switch the Exactness tab names and checks that domain's model, with that
    domain's example; a one-token span is refused with a sentence saying that the exact and the
    wrong laws coincide there (no N is advised), before anything is drawn."""
    page = _page(chromium, url)
    page.get_by_label("protein").check()  # the tiny studio has text and protein models
    page.get_by_role("tab", name="Exactness").click()
    _wait_text(page, "#exactness-in-view", "protein-asarm")
    assert "(protein)" in page.inner_text("#exactness-in-view")
    assert page.input_value("#exactness-model input") == "protein-asarm"
    assert "[MASK:2]" in page.input_value("#exactness-text textarea")
    assert "best of times" not in page.input_value("#exactness-text textarea")
    _shot(page, request, "protein")
    page.get_by_role("radio", name="text").check()
    _wait_text(page, "#exactness-in-view", "text-asarm")
    assert "best of times" in page.input_value("#exactness-text textarea")
    page.fill("#exactness-text textarea", "The cat sat on the [MASK:1] mat.")
    page.click("#exactness-run")
    page.wait_for_function("/one token|\u26a0|Done/.test(document.querySelector('#exactness-status').innerText)", timeout=60_000)
    status = page.inner_text("#exactness-status")
    assert "no number of draws can tell" in status and "N =" not in status, status
    _shot(page, request, "one-token")
    page.close()


COUNTS_JS = """() => { window.__counts = [];
  const read = () => { const m = /tokens (\\d+)\\/(\\d+)/.exec(document.querySelector('#counters').innerText);
    if (m) window.__counts.push(+m[1]); };
  new MutationObserver(read).observe(document.querySelector('#counters'),
    {subtree: true, childList: true, characterData: true}); }"""


def test_watch_never_rewinds_what_was_shown(chromium, url, request, monkeypatch):
    """Watch on, a run whose rounds arrive over a few seconds of wall time but compute in well under
    WATCH_UNDER: the decided-token count shown never goes down (it used to climb live to 56/60, then
    restart at 0/60 when the Watch replay began), and the status shows no Gradio timer."""
    import time as _time

    from app.run import streaming

    fast = streaming.rounds

    def slow(live):  # the wait is outside the sampler: its compute stays short, its wall time is not
        for lv in fast(live):
            _time.sleep(0.08)
            yield lv

    monkeypatch.setattr(streaming, "rounds", slow)
    page = _page(chromium, url)
    box = page.locator("#watch input")
    if not box.is_checked():
        box.click()
    page.fill("#infill-text textarea", "a[MASK:40]b")
    page.evaluate(COUNTS_JS)
    page.click("#run")
    _wait_text(page, "#status", "Watching", timeout=60_000)
    assert page.query_selector("#status .progress-text, #status .eta-bar, #status .timer") is None
    _wait_text(page, "#status", "Done", timeout=120_000)
    counts = page.evaluate("window.__counts")
    assert counts and counts[-1] == 40, counts
    assert all(b >= a for a, b in zip(counts, counts[1:])), counts
    _shot(page, request, "watched")
    page.close()


#: every element that shows text of its own, and every button, text box and select, with its text
#: colour composed over its real background (ancestors' fills and opacities): the contrast ratio; and
#: every checkbox, radio and slider by what draws it (edge, checked fill, thumb, filled track)
CONTRAST_JS = r"""() => {
  const lum = (c) => { const v = c / 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
  const parse = (s) => { const m = s.match(/[\d.]+/g); if (!m) return null; const [r, g, b, a] = m.map(Number);
    return [r, g, b, a === undefined ? 1 : a]; };
  const L = ([r, g, b]) => 0.2126 * lum(r) + 0.7152 * lum(g) + 0.0722 * lum(b);
  const blend = (top, under) => top[3] >= 1 ? top : [0, 1, 2].map(i => top[i] * top[3] + under[i] * (1 - top[3])).concat([1]);
  const bgOf = (el) => { const layers = []; for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor); if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let bg = [255, 255, 255, 1]; for (let i = layers.length - 1; i >= 0; i--) bg = blend(layers[i], bg); return bg; };
  const hex = (h) => { const v = h.slice(1); const n = v.length === 3 ? [...v].map(c => parseInt(c + c, 16))
    : [0, 2, 4].map(i => parseInt(v.slice(i, i + 2), 16)); return 'rgb(' + n.join(', ') + ')'; };
  const out = [];
  const seen = new Set();
  for (const el of document.querySelectorAll('body *')) {
    if (!el.offsetParent && getComputedStyle(el).position !== 'fixed') continue;
    const st = getComputedStyle(el);
    if (st.visibility === 'hidden' || +st.opacity === 0) continue;
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    const control = ['BUTTON', 'SELECT', 'TEXTAREA'].includes(el.tagName)
      || (el.tagName === 'INPUT' && !['checkbox', 'radio', 'range'].includes(el.type));
    if (!own && !control) continue;
    if (el.closest('svg, .js-plotly-plot, [data-testid="status-tracker"]')) continue;
    const r = el.getBoundingClientRect(); if (r.width < 1 || r.height < 1) continue;
    let op = 1; for (let e = el; e; e = e.parentElement) op *= +getComputedStyle(e).opacity;
    const bg = bgOf(el);
    let fg = parse(st.color); fg = blend([fg[0], fg[1], fg[2], fg[3] * op], bg);
    const a = L(fg), b = L(bg);
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const text = (el.innerText || el.value || el.getAttribute('aria-label') || '').trim().slice(0, 40);
    const key = el.tagName + '|' + text + '|' + st.color + '|' + bg.join(',');
    if (seen.has(key)) continue; seen.add(key);
    const disabled = el.disabled || el.closest('[disabled]');
    out.push({tag: el.tagName, id: el.id, text, color: st.color, ratio: +ratio.toFixed(2), disabled: !!disabled,
              bg: 'rgb(' + bg.slice(0, 3).map(Math.round).join(',') + ')'});
  }
  for (const el of document.querySelectorAll('input[type=checkbox], input[type=radio], input[type=range]')) {
    if (!el.offsetParent) continue;
    const st = getComputedStyle(el);
    // what draws the control: a box's edge (its fill once checked), a slider's thumb and filled track
    const drawn = el.type === 'range'
      ? [['thumb', st.getPropertyValue('--color-accent')], ['track', st.getPropertyValue('--slider-color')]]
      : [[el.checked ? 'checked' : 'edge', el.checked ? st.backgroundColor : st.borderTopColor]];
    const bg = bgOf(el.parentElement);
    for (const [part, colour] of drawn) {
      const fg = parse(colour.trim().startsWith('#') ? hex(colour.trim()) : colour);
      if (!fg) { out.push({tag: 'INPUT', id: el.id, text: el.type + ' ' + part + ' (unreadable colour)',
                           color: colour, ratio: 0, disabled: el.disabled, bg: ''}); continue; }
      const a = L(blend(fg, bg)), b = L(bg);
      out.push({tag: 'INPUT', id: el.id, text: el.type + ' ' + part, color: colour.trim(),
                ratio: +((Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)).toFixed(2), disabled: el.disabled,
                bg: 'rgb(' + bg.slice(0, 3).map(Math.round).join(',') + ')'});
    }
  }
  return out;
}"""


def test_every_text_and_control_meets_aa_contrast(chromium, url, request):
    """Measured from the page in every tab, after a run (its tokens and status on screen): each
    text and control (enabled; checkboxes, radios and sliders by what draws them) has contrast
    4.5:1 or more; no emoji glyph Debian's chromium cannot draw in the status; the Done line agrees
    in number ("1 token in 1 call")."""
    page = _page(chromium, url)
    page.fill("#infill-text textarea", "a[MASK:1]b")
    page.click("#run")
    _wait_text(page, "#status", "Done")
    status = page.inner_text("#status")
    assert "\u2705" not in status and "1 token in 1 call" in status, status
    low = {}
    for tab in ("Step player", "Compare", "Exactness", "Statistics", "Sessions"):
        page.get_by_role("tab", name=tab).click()
        page.wait_for_timeout(500)  # the tab is drawn (reads the page once it is)
        for r in page.evaluate(CONTRAST_JS):
            if r["ratio"] < 4.5 and not r["disabled"]:
                low[(r["tag"], r["text"], r["color"], r["bg"])] = r["ratio"]
    _shot(page, request, "contrast")
    assert not low, low
    page.close()
