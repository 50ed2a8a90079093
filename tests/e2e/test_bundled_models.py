"""The page on the bundled checkpoints: a 256-token, 95%-masked text infill with ASSD, timed from
pressing Run to the first coloured step and to the end, plus the README's screenshots.

Separate module (its own app instance) because tests/e2e/test_browser.py hides the bundled models.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.e2e.test_browser import ARGS, ARTIFACTS, CHROMIUM, _new_page

pytestmark = pytest.mark.e2e
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def bundled_url(tmp_path_factory):
    from engine import registry

    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    pytest.importorskip("playwright")
    if "text-asarm" not in {r["name"] for r in registry.available()}:
        pytest.skip("bundled text-asarm checkpoint missing")
    root = tmp_path_factory.mktemp("bundled")
    old = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = f"sqlite:///{root / 'studio.db'}"
    from app import core
    from app.testing import launch_for_tests

    core._store = None
    demo, url = launch_for_tests()
    yield url
    demo.close()
    core._store = None
    if old is None:
        os.environ.pop("DATABASE_URL", None)
    else:
        os.environ["DATABASE_URL"] = old


def test_256_token_infill_timing_and_screenshots(bundled_url):
    from playwright.sync_api import sync_playwright

    from engine.registry import load
    from engine.workloads import masked_windows

    lm = load("text-asarm")
    mi = masked_windows("text", lm.codec, 256, 0.95, 1, seed=3)[0] if _has_corpus() else None
    text = mi.source if mi is not None else "The " + "[MASK:243]" + " end of the day was near, and the sea was calm."
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = _new_page(browser, bundled_url)
        page.fill("#infill-text textarea", text)
        t0 = time.perf_counter()
        page.click("#run")
        page.wait_for_selector('#player [data-role="accepted"]', state="attached", timeout=60_000)
        first = time.perf_counter() - t0
        page.wait_for_function("document.querySelector('#status').innerText.includes('Done')", timeout=300_000)
        total = time.perf_counter() - t0
        assert "?s=" in page.input_value("#share-link textarea, #share-link input")
        page.screenshot(path=str(ARTIFACTS / "bundled-step-player.png"), full_page=True)
        (ARTIFACTS / "bundled-timings.txt").write_text(
            f"text-asarm, assd k=5, {len(mi.masked) if mi else 243} masked of 256 tokens\n"
            f"first coloured step after Run: {first:.2f} s\ntotal: {total:.2f} s\n")
        page.fill("#infill-text textarea", "The old man walked to the [MASK:12] and looked at the sea.")
        page.get_by_role("tab", name="Compare").click()
        page.click("#compare-run")
        page.wait_for_function("document.body.innerText.includes('both runs stored')", timeout=120_000)
        page.wait_for_selector(".js-plotly-plot", timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "bundled-compare.png"), full_page=True)
        browser.close()


def _has_corpus() -> bool:
    from engine.data import corpus_dir

    return (corpus_dir("text") / "test.jsonl").is_file()
