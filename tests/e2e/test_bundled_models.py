"""The page on the bundled checkpoints: a 256-token, 95%-masked text infill with ASSD, timed from
pressing Run to the first coloured step and to the end, plus the screenshots of docs/USING.md.

Separate module (its own app instance) because tests/e2e/test_browser.py hides the bundled models.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.e2e.test_browser import ARGS, ARTIFACTS, CHROMIUM, _new_page, choose_sampler, need_browser

pytestmark = pytest.mark.e2e
DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.fixture(scope="module")
def bundled_url(tmp_path_factory):
    from engine.loading import registry

    need_browser()
    if "text-asarm" not in {r["name"] for r in registry.available()}:
        pytest.skip("bundled text-asarm checkpoint missing")
    root = tmp_path_factory.mktemp("bundled")
    old = os.environ.get("DATABASE_URL")
    old_watch = os.environ.get("INFILL_WATCH")
    os.environ["INFILL_WATCH"] = "0"  # timed from Run to the end as it computes, without the Watch pace
    os.environ["DATABASE_URL"] = f"sqlite:///{root / 'studio.db'}"
    from app.stored import store as app_store
    from tools.tiny_models import launch_for_tests

    app_store._store = None
    demo, url = launch_for_tests()
    yield url
    demo.close()
    app_store._store = None
    if old_watch is None:
        os.environ.pop("INFILL_WATCH", None)
    else:
        os.environ["INFILL_WATCH"] = old_watch
    if old is None:
        os.environ.pop("DATABASE_URL", None)
    else:
        os.environ["DATABASE_URL"] = old


# Our own prose (no corpus needed, so CI and a developer's machine time the same input).
PARAGRAPH = (
    "The harbour was quiet when the fishing boats came back in the evening. The old man tied his boat "
    "to the post, lifted the basket of fish onto the stones and sat down to rest. Children ran along the "
    "wall and shouted at the gulls, and a woman called them home for supper. Above the town the church "
    "bell rang six times. The sea was calm and grey, and the last light of the day lay on the water like "
    "a sheet of thin metal. He thought about the morning, when the wind had turned and the waves had "
    "risen so quickly that he had been afraid for the first time in many years. Now it seemed like a "
    "story told by somebody else. He counted the fish, set aside the best ones for his sister, and walked "
    "slowly up the narrow street to the market, where the lamps were already lit and the traders were "
    "packing their carts. A dog followed him for a while and then lost interest. At the corner he stopped "
    "to talk with the baker, who asked about the storm, and they agreed that the summer had been strange. "
    "When he reached his door the stars were out, and the smell of bread and smoke filled the cold air."
)


def masked_256(codec, max_tokens: int, rate: float = 0.95):
    """The paragraph cut to max_tokens tokens with `rate` of its positions masked at random (seeded),
    as the text a visitor would type; the first seed whose text re-parses within the limit."""
    import random

    from engine.inputs.masking import from_token_positions, parse_masked_text

    ids = codec.encode(PARAGRAPH)[:max_tokens]
    for seed in range(100):
        pos = sorted(random.Random(seed).sample(range(len(ids)), round(rate * len(ids))))
        text = from_token_positions(ids, pos, codec, max_tokens=max_tokens).source
        mi = parse_masked_text(text, codec, max_tokens=max_tokens)
        if len(mi.tokens) <= max_tokens:
            return text, mi
    raise AssertionError("no seed gives an input within the model's length")


def test_256_token_infill_timing_and_screenshots(bundled_url):
    from playwright.sync_api import sync_playwright

    from engine.loading.registry import load

    lm = load("text-asarm")
    text, mi = masked_256(lm.codec, lm.max_tokens)
    assert len(mi.tokens) >= 250 and len(mi.masked) >= 0.9 * len(mi.tokens)
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = _new_page(browser, bundled_url)
        page.fill("#infill-text textarea", text)
        choose_sampler(page, "assd-cache")
        t0 = time.perf_counter()
        page.click("#run")
        page.wait_for_function(  # the first accepted token, or a message: fail fast with what the page says
            "document.querySelector('#player [data-role=\"accepted\"]') !== null"
            " || /Done|\u26a0/.test(document.querySelector('#status').innerText)", timeout=60_000)
        first = time.perf_counter() - t0
        assert page.query_selector('#player [data-role="accepted"]') is not None, page.inner_text("#status")
        page.wait_for_function("document.querySelector('#status').innerText.includes('Done')", timeout=300_000)
        total = time.perf_counter() - t0
        assert "?s=" in page.input_value("#share-link textarea, #share-link input")
        page.screenshot(path=str(ARTIFACTS / "bundled-step-player.png"), full_page=True)
        (ARTIFACTS / "bundled-timings.txt").write_text(
            f"text-asarm, assd k=5, {len(mi.masked)} masked of {len(mi.tokens)} tokens\n"
            f"first coloured step after Run: {first:.2f} s\ntotal: {total:.2f} s\n")
        page.fill("#infill-text textarea", "The old man walked to the [MASK:12] and looked at the sea.")
        page.get_by_role("tab", name="Compare").click()
        page.click("#compare-run")
        page.wait_for_function("document.body.innerText.includes('both runs stored')", timeout=120_000)
        page.wait_for_selector(".js-plotly-plot", timeout=30_000)
        page.screenshot(path=str(ARTIFACTS / "bundled-compare.png"), full_page=True)
        browser.close()



def test_zurich_survives_the_token_view_and_the_player(bundled_url, request):
    """Byte-level BPE splits "ü" into two tokens; every view decodes by character offsets."""
    from playwright.sync_api import sync_playwright

    text = "Zürich liegt am Zürichsee, [MASK:4] schön."
    folder = ARTIFACTS / request.node.name
    folder.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        page = _new_page(browser, bundled_url)
        page.fill("#infill-text textarea", text)
        page.click("#show-tokens")
        page.wait_for_selector("#token-toggle label", timeout=30_000)
        labels = page.eval_on_selector_all("#token-toggle label", "els => els.map(e => e.innerText.trim())")
        joined = "".join(lb.replace("◌", "").replace("␣", " ") for lb in labels)
        assert "\ufffd" not in joined and joined.startswith("Zürich liegt am Zürichsee,"), labels
        page.locator("#token-toggle label").last.click()  # mask the final "." from the token view
        page.wait_for_function("!document.querySelector('#infill-text textarea').value.endsWith('schön.')",
                               timeout=30_000)
        after = page.input_value("#infill-text textarea")
        assert after.startswith("Zürich liegt am Zürichsee,") and "schön" in after and "\ufffd" not in after
        page.screenshot(path=str(folder / "token-view.png"), full_page=True)
        page.fill("#infill-text textarea", text)
        page.click("#run")
        page.wait_for_function("document.querySelector('#status').innerText.includes('Done')", timeout=300_000)
        shown = page.inner_text("#player .tv-wrap")
        assert shown.startswith("Zürich liegt am Zürichsee,") and "schön." in shown and "\ufffd" not in shown
        page.click("#step-back")
        page.wait_for_function("/step \\d+\\//.test(document.querySelector('#counters').innerText)", timeout=30_000)
        shown = page.inner_text("#player .tv-wrap")
        assert shown.startswith("Zürich liegt am Zürichsee,") and "\ufffd" not in shown
        assert "\ufffd" not in page.inner_text("#completed")
        page.screenshot(path=str(folder / "player.png"), full_page=True)
        browser.close()
