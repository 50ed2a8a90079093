"""Real-browser checks: Debian's chromium driven headless by Playwright (no `playwright install`).

Run with `make e2e` (pytest -m e2e). Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"  # unlike an innerHTML <script>, this one would run if not escaped
INPUT = f"Once upon a time {SCRIPT} the [MASK:30] and {IMG} home."


def need_browser() -> None:
    """Skip without Debian's chromium or Playwright, except in CI (INFILL_REQUIRE_SERVICES=1, set by
    .ci/run), where a browser that could not be installed fails the suite instead of skipping it."""
    missing = None
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        missing = "Debian chromium is not installed (apt-get install chromium)"
    else:
        try:
            import playwright  # noqa: F401
        except ImportError:
            missing = "playwright is not installed (make e2e installs it)"
    if missing and os.environ.get("INFILL_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{missing}, and INFILL_REQUIRE_SERVICES=1 (.ci/run) requires the browser tests", pytrace=False)
    if missing:
        pytest.skip(missing)


@contextlib.contextmanager
def tiny_studio(root: Path, watch: str | None):
    """The app on tiny random models in `root` (no bundled model listed, its own SQLite store), with
    INFILL_WATCH set to `watch` (None: the page's own default); the URL, everything restored after."""
    from tests.support.studio import restore_env

    saved = {k: os.environ.get(k) for k in ("INFILL_MODEL_DIRS", "DATABASE_URL", "INFILL_WATCH")}
    os.environ["INFILL_MODEL_DIRS"] = str(root / "models")
    os.environ["DATABASE_URL"] = f"sqlite:///{root / 'studio.db'}"
    if watch is None:
        os.environ.pop("INFILL_WATCH", None)
    else:
        os.environ["INFILL_WATCH"] = watch
    from app.stored import store as app_store
    from engine.loading import folders as model_folders
    from tools.tiny_models import launch_for_tests, make_tiny_models

    saved_assets = model_folders.ASSETS
    model_folders.ASSETS = root / "no-bundled-models"  # only the tiny models below are listed
    make_tiny_models(root / "models")
    app_store._store = None
    demo, url = launch_for_tests()
    try:
        yield url
    finally:
        demo.close()
        model_folders.ASSETS = saved_assets
        app_store._store = None
        restore_env(saved)


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    need_browser()
    # Watch off: these tests read runs as they compute (test_first_run.py watches)
    with tiny_studio(tmp_path_factory.mktemp("e2e"), watch="0") as url:
        yield url


@pytest.fixture(scope="module")
def browser(app_url):
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def _new_page(browser, url):
    page = browser.new_page(viewport={"width": 1400, "height": 1800})
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.goto(url)
    page.wait_for_selector("#infill-text textarea", timeout=30_000)
    for control in ("#run", "#stop"):  # a loaded machine renders the buttons after the input box
        page.wait_for_selector(control, state="attached", timeout=30_000)
    return page


#: the viewport the page is judged at (a common laptop screen)
W, H = 1366, 768


def launched_chromium():
    """Debian's Chromium, headless, for a module's fixture (yield from it)."""
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def open_page(browser, url, width=W, height=H):
    """The page at a person's screen size, once its input box and model card are drawn."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.goto(url)
    page.wait_for_selector("#infill-text textarea", timeout=30_000)
    page.wait_for_function("document.querySelector('#model-card').innerText.includes('Model card')", timeout=30_000)
    return page


def shot(page, request, name="viewport"):
    """The viewport, what a person sees, saved under the test's own artifacts folder."""
    folder = ARTIFACTS / request.node.name
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"))


def wait_text(page, sel: str, needle: str, timeout=60_000) -> None:
    page.wait_for_function(f"(document.querySelector({sel!r}) || {{innerText: ''}}).innerText.includes({needle!r})",
                           timeout=timeout)


def choose_sampler(page, name: str) -> None:
    """Pick a sampler in the form (the default is cached sequential decoding, which drafts nothing)."""
    page.click("#sampler input")
    page.get_by_role("option", name=name, exact=True).click()


def _roles(page, root="#player"):
    return page.eval_on_selector_all(f"{root} [data-role]", "els => els.map(e => e.dataset.role + ':' + e.textContent)")


def test_run_assd_see_colours_then_share_link_replays(browser, app_url):
    page = _new_page(browser, app_url)
    page.fill("#infill-text textarea", INPUT)
    choose_sampler(page, "assd")
    page.fill("#seed input", "5")  # this seed rejects a draft on the tiny random model
    page.keyboard.press("Tab")
    t0 = time.perf_counter()
    page.click("#run")
    page.wait_for_function(  # the first accepted token, or a message: fail fast with what the page says
        "document.querySelector('#player [data-role=\"accepted\"]') !== null"
        " || /Done|\u26a0/.test(document.querySelector('#status').innerText)", timeout=30_000)
    first_step = time.perf_counter() - t0
    assert page.query_selector('#player [data-role="accepted"]') is not None, page.inner_text("#status")
    page.wait_for_function("document.querySelector('#status').innerText.includes('Done')", timeout=60_000)
    total = time.perf_counter() - t0
    page.screenshot(path=str(ARTIFACTS / "step-player.png"), full_page=True)
    roles = _roles(page)
    assert any(r.startswith("accepted:") for r in roles)
    assert any(r.startswith("rejected:") for r in roles), "expected at least one rejected draft"
    assert any(r.startswith("resampled:") for r in roles)
    # the script tag is shown as text, never executed
    text = page.inner_text("#player")
    assert SCRIPT in text.replace("\n", "") and IMG in text.replace("\n", "")
    assert page.query_selector("#player img") is None
    assert page.dialogs == []
    completed = page.input_value("#completed textarea")
    assert completed.startswith("Once upon a time " + SCRIPT)
    link = page.input_value("#share-link textarea, #share-link input")
    assert "?s=" in link
    # then, under the figures: the speed-up against cached sequential decoding of the same input
    page.wait_for_function("document.querySelector('#speedup').innerText.includes('vs cached sequential')",
                           timeout=60_000)
    assert page.input_value("#speed input") == "5 tokens/s"  # the playback-speed control is untouched
    (ARTIFACTS / "timings.txt").write_text(
        f"first coloured step after Run: {first_step:.2f} s\ntotal run (30 masked, tiny model): {total:.2f} s\n")

    other = _new_page(browser, link)
    other.wait_for_function("document.querySelector('#status').innerText.includes('Restored')", timeout=30_000)
    assert other.input_value("#infill-text textarea") == INPUT
    assert other.input_value("#completed textarea") == completed
    assert _roles(other) == roles
    assert other.dialogs == []
    other.screenshot(path=str(ARTIFACTS / "share-link.png"), full_page=True)
    other.close()
    page.close()


def test_mask_selection_button(browser, app_url):
    page = _new_page(browser, app_url)
    page.fill("#infill-text textarea", "hello world")
    page.eval_on_selector("#infill-text textarea", "el => { el.focus(); el.setSelectionRange(6, 11); }")
    page.click("#mask-selection")
    page.wait_for_function(
        "document.querySelector('#infill-text textarea').value === 'hello [MASK:5]'", timeout=15_000)
    page.close()


def test_compare_view(browser, app_url):
    page = _new_page(browser, app_url)
    page.fill("#infill-text textarea", "The quick brown fox [MASK:30] over the lazy dog.")
    page.get_by_role("tab", name="Compare").click()
    page.click("#compare-run")
    page.wait_for_selector("#compare-b [data-role='sampled']", state="attached", timeout=60_000)
    page.wait_for_function("document.body.innerText.includes('both runs stored')", timeout=60_000)
    page.wait_for_selector(".js-plotly-plot", timeout=30_000)
    page.screenshot(path=str(ARTIFACTS / "compare.png"), full_page=True)
    assert _roles(page, "#compare-a") and _roles(page, "#compare-b")
    page.close()
