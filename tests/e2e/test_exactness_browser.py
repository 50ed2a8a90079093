"""The Exactness tab in a real browser (Debian's chromium, headless, as tests/e2e/test_browser.py):
a check runs on the tiny random models, draws its chart and table, and its share link replays it.

Run with `make e2e` (pytest -m e2e). Screenshots go to test-artifacts/."""

from __future__ import annotations

import pytest

from tests.e2e.test_browser import ARTIFACTS, _new_page, app_url, browser  # noqa: F401 - shared fixtures

pytestmark = pytest.mark.e2e


def test_exactness_check_runs_and_its_link_replays(browser, app_url):  # noqa: F811
    page = _new_page(browser, app_url)
    page.get_by_role("tab", name="Exactness").click()
    page.fill("#exactness-text textarea", "The cat <b>sat</b> on the [MASK:2] mat.")
    for name in ("assd-ptp", "wrong-assd-residual-from-q"):  # the tiny models have no PTP drafter
        page.locator("#exactness-samplers label", has_text=name).click()
    page.locator("#exactness-samplers label", has_text="wrong-assd-accept-all").click()
    page.fill("#exactness-n input", "40")
    page.keyboard.press("Tab")
    page.click("#exactness-run")
    page.wait_for_function("/Done|\u26a0/.test(document.querySelector('#exactness-status').innerText)",
                           timeout=120_000)
    status = page.inner_text("#exactness-status")
    assert "Done" in status, status
    page.wait_for_selector("#exactness-plot .js-plotly-plot", timeout=30_000)
    table = page.inner_text("#exactness-table")
    for name in ("sequential-cache", "assd-cache", "assd-pipelined", "wrong-assd-accept-all"):
        assert name in table
    assert "deliberately wrong" in table
    link = page.input_value("#exactness-link textarea, #exactness-link input")
    assert "?s=" in link
    page.screenshot(path=str(ARTIFACTS / "exactness.png"), full_page=True)

    other = _new_page(browser, link)
    other.wait_for_function(  # the tab is drawn once the restore selects it
        "(document.querySelector('#exactness-status') || {innerText: ''}).innerText"
        ".includes('Restored exactness check')", timeout=30_000)
    other.wait_for_selector("#exactness-plot .js-plotly-plot", timeout=30_000)
    assert other.inner_text("#exactness-table") == table
    assert other.input_value("#exactness-text textarea") == "The cat <b>sat</b> on the [MASK:2] mat."
    assert other.dialogs == [] and page.dialogs == []
    other.close()
    page.close()
