"""The first minute of a newcomer (issue 25), in Debian's Chromium at 1366x768: the default Run
shows drafts and accepts in view while it runs (Watch pace on, as a visitor finds it), play speeds
do what their labels say, refused values leave Run usable, a shared link opens with its trace in
view and plays, and the page's plain-words details. Tiny random models (test_browser.py's), in an
app of its own so the Watch default is the page's own. Screenshots go to test-artifacts/<test>/."""

from __future__ import annotations

import re
import time

import pytest

from engine.samplers import default_sampler
from tests.e2e.test_browser import launched_chromium, need_browser, tiny_studio
from tests.e2e.test_browser import open_page as _page
from tests.e2e.test_browser import shot as _shot

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def first_url(tmp_path_factory):
    need_browser()
    with tiny_studio(tmp_path_factory.mktemp("first"), watch=None) as url:  # the page's own Watch default
        yield url


@pytest.fixture(scope="module")
def chromium(first_url):
    yield from launched_chromium()


def _status(page) -> str:
    return page.inner_text("#status")


def _wait_status(page, needle, timeout=60_000):
    page.wait_for_function(f"document.querySelector('#status').innerText.includes({needle!r})", timeout=timeout)


def _run_enabled(page) -> bool:
    return page.eval_on_selector("#run", "el => !el.disabled")


def _in_view(page, selector) -> list[dict]:
    """Bounding boxes of the matching elements that lie wholly inside the viewport."""
    return page.eval_on_selector_all(selector, """els => els.map(e => e.getBoundingClientRect())
        .filter(r => r.width > 0 && r.top >= 0 && r.bottom <= window.innerHeight)
        .map(r => ({top: r.top, bottom: r.bottom}))""")


def _watch(page, on: bool) -> None:
    box = page.locator("#watch input")
    if box.is_checked() != on:
        box.click()


def _run_to_done(page, text: str, seed="3", watch=False):
    _watch(page, watch)
    page.fill("#infill-text textarea", text)
    page.fill("#seed input, #seed textarea", seed)
    page.keyboard.press("Tab")
    page.click("#run")
    _wait_status(page, "Done")


def test_default_run_shows_drafts_and_accepts_in_view(chromium, first_url, request):
    """Nothing typed: Run with the page's defaults shows drafted and accepted tokens inside the
    1366x768 viewport while the run is under way (the Watch pace holds each round on screen)."""
    from app.examples import DEFAULT_SAMPLER, EXAMPLES

    page = _page(chromium, first_url)
    assert page.input_value("#sampler input") == DEFAULT_SAMPLER != "sequential-cache"
    assert EXAMPLES["text"][0].count("[MASK") >= 2
    assert page.locator("#watch input").is_checked()
    page.click("#run")
    seen: set[str] = set()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and "Done" not in _status(page):
        for role in ("drafted", "accepted"):
            if _in_view(page, f"#player [data-role='{role}']"):
                seen.add(role)
        if seen == {"drafted", "accepted"} and "shot" not in seen:
            _shot(page, request, "while-running")
            seen.add("shot")
        time.sleep(0.03)
    assert {"drafted", "accepted"} <= seen, seen
    _wait_status(page, "Done")
    assert _in_view(page, "#player"), "the trace is in view when the run ends"
    page.close()


def test_play_speed_matches_its_label(chromium, first_url, request):
    """Replay at "10 tokens/s" and "30 tokens/s": decided tokens per second, timed in the browser from
    the counters line, within 20% of the label."""
    page = _page(chromium, first_url)
    _run_to_done(page, "x[MASK:60]y")
    # the browser stamps each change of the counters line (a poll from here would add its own lag)
    page.evaluate("""() => {
        window.__ticks = [];
        const el = document.querySelector('#counters');
        new MutationObserver(() => {
            const m = /tokens (\\d+)\\/60/.exec(el.innerText);
            const t = window.__ticks;
            if (m && (!t.length || t[t.length - 1][1] !== +m[1])) t.push([performance.now(), +m[1]]);
        }).observe(el, {subtree: true, childList: true, characterData: true});
    }""")
    for label, rate in (("10 tokens/s", 10.0), ("30 tokens/s", 30.0)):
        page.click("#speed")
        page.get_by_role("option", name=label).click()
        page.evaluate("() => { window.__ticks = []; }")
        page.click("#replay")
        page.wait_for_function("(() => { const t = window.__ticks; const s = t.findIndex(x => x[1] <= 5);"
                               " return s >= 0 && t.slice(s).some(x => x[1] === 60); })()", timeout=30_000)
        ticks = page.evaluate("() => window.__ticks")
        start = next(i for i, t in enumerate(ticks) if t[1] <= 5)  # the replay's first frames
        moving = [t for t in ticks[start:] if t[1] > 0]
        end = next(i for i, t in enumerate(moving) if t[1] == 60)
        first, last = moving[0], moving[end]
        assert end >= 5, ticks
        measured = (last[1] - first[1]) / ((last[0] - first[0]) / 1000)
        print(f"{label}: measured {measured:.2f} decided tokens/s over {last[1] - first[1]} tokens")
        assert abs(measured - rate) <= 0.2 * rate, (label, measured, len(ticks))
    page.close()


def test_refused_values_leave_run_enabled(chromium, first_url, request):
    """A negative seed, an out-of-range temperature and a lower-case [mask]: each is refused with a
    message, Run is enabled again, and the top of the seed range runs."""
    page = _page(chromium, first_url)
    _watch(page, False)
    page.fill("#seed input, #seed textarea", "-3")
    page.click("#run")
    _wait_status(page, "seed")
    assert "18446744073709551615" in _status(page)
    page.wait_for_function("!document.querySelector('#run').disabled", timeout=10_000)
    _shot(page, request, "negative-seed")
    page.fill("#seed input, #seed textarea", "18446744073709551615")
    page.click("#run")
    _wait_status(page, "Done")
    page.wait_for_function("!document.querySelector('#run').disabled", timeout=10_000)
    # a temperature typed beyond the slider's range is clamped, and the page says so
    page.fill("#knob-temperature input[type='number']", "50")
    page.keyboard.press("Tab")
    page.wait_for_function("document.querySelector('#knob-note').innerText.includes('temperature')",
                           timeout=5_000)
    note = page.inner_text("#knob-note")
    assert "50" in note and "0.05 to 10" in note and "set to 10" in note, note
    page.fill("#knob-temperature input[type='number']", "1")
    page.keyboard.press("Tab")
    # lower-case markers get a hint, under the input and on Run
    page.fill("#infill-text textarea", "the [mask] sat on the mat")
    page.wait_for_function("document.querySelector('#token-count').innerText.includes('upper case')",
                           timeout=10_000)
    page.click("#run")
    _wait_status(page, "write [MASK]")
    page.wait_for_function("!document.querySelector('#run').disabled", timeout=10_000)
    page.close()


def test_shared_link_opens_in_view_and_plays(chromium, first_url, request):
    """A share link at 1366x768: the restored trace is in view, the page says what was restored and
    how to play it, and Play plays it from the start."""
    page = _page(chromium, first_url, 1400, 1800)
    _run_to_done(page, "Once upon a time the [MASK:30] went home to [MASK:12].")
    link = page.input_value("#share-link textarea, #share-link input")
    assert "?s=" in link
    page.close()
    other = _page(chromium, link)
    _wait_status(other, "Restored")
    status = _status(other)
    assert default_sampler("text") in status and "seed 3" in status and "play" in status  # the run's sampler
    other.wait_for_function("document.querySelector('#counters').innerText.includes('restored')", timeout=10_000)
    assert _in_view(other, "#player [data-role='accepted']"), "restored tokens in view without scrolling"
    assert _in_view(other, "#play") and _in_view(other, "#counters")
    _shot(other, request, "restored")
    other.click("#play")
    other.wait_for_function("(() => { const m = /step (\\d+)\\/(\\d+)/.exec(document.querySelector('#counters')"
                            ".innerText); return m && +m[1] > 0 && +m[1] < +m[2]; })()", timeout=15_000)
    other.wait_for_function("(() => { const m = /step (\\d+)\\/(\\d+)/.exec(document.querySelector('#counters')"
                            ".innerText); return m && m[1] === m[2]; })()", timeout=60_000)
    other.close()


def test_skip_to_end_and_hide_earlier_drafts(chromium, first_url, request):
    """Watch on: a 60-token run would take 12 s at the Watch pace; Skip to end shows it finished at
    once. Once it ends, rejected drafts of earlier rounds are hidden while the box is ticked and
    shown again when it is not."""
    page = _page(chromium, first_url)
    _watch(page, True)
    page.fill("#infill-text textarea", "a[MASK:60]b")
    page.click("#run")
    _wait_status(page, "Watching", timeout=30_000)
    t0 = time.monotonic()
    page.click("#skip")
    _wait_status(page, "Done", timeout=30_000)
    assert time.monotonic() - t0 < 6.0, "skip to end ends the Watch pace"
    faded = "#player .tv-faded[data-pos]"  # the drafts (the legend's example stays)
    assert page.locator(faded).count() > 0, "the run rejected drafts in earlier rounds"
    page.wait_for_function(f"[...document.querySelectorAll('{faded}')].every(e => e.offsetParent === null)",
                           timeout=5_000)
    page.locator("#hide-old input").click()
    page.wait_for_function(f"[...document.querySelectorAll('{faded}')].some(e => e.offsetParent !== null)",
                           timeout=5_000)
    page.close()


def test_knobs_follow_the_sampler_and_examples_follow_the_domain(chromium, first_url, request):
    """Cached sequential decoding reads no k: the k slider hides; the Examples box shows the new
    domain's first example after a domain switch, and the default sampler follows the domain."""
    from app.examples import EXAMPLES
    from engine.samplers import default_sampler

    page = _page(chromium, first_url)
    assert page.locator("#knob-k").is_visible()
    page.click("#sampler input")
    page.get_by_role("option", name="sequential-cache", exact=True).click()
    page.wait_for_function("!document.querySelector('#knob-k') || document.querySelector('#knob-k')"
                           ".offsetParent === null", timeout=10_000)
    page.get_by_label("protein").check()
    page.wait_for_function(f"document.querySelector('#examples input').value === {EXAMPLES['protein'][0]!r}",
                           timeout=15_000)
    page.wait_for_function(f"document.querySelector('#sampler input').value === {default_sampler('protein')!r}",
                           timeout=15_000)
    assert re.search(r"\d\.\d\dx", page.inner_text("#sampler-help"))
    page.close()
