"""Following a running step's log in real headless Chromium, until the executor marks it SUCCESS.

In a module of its own, with its own prefix: the held training step is released by the test,
prints more lines (which the page appends by polling /api/log), and the executor finishes it.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect, sync_playwright

from marin.browser.app import create_app
from tests.browser_pipeline import lab_prefix, release
from tests.browser_support import CHROMIUM_ARGS, ServerThread, artifacts_dir, chromium_path


@pytest.fixture(scope="module")
def chromium():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def test_running_step_log_follows_until_the_step_succeeds(chromium, tmp_path):
    with lab_prefix(tmp_path / "lab") as names, ServerThread(create_app([str(tmp_path / "lab")])) as server:
        page = chromium.new_page(viewport={"width": 1360, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{server.url}/step/0/{names['train']}")
        expect(page.locator("h1 .badge")).to_have_text("running")
        expect(page.locator("pre.log")).to_contain_text("holding")
        expect(page.locator("pre.log")).not_to_contain_text("released")
        release(names)  # the real step goes on printing, then the executor marks it SUCCESS
        expect(page.locator("pre.log")).to_contain_text("released: saving the final checkpoint", timeout=15_000)
        expect(page.locator(".note", has_text="now SUCCESS")).to_be_visible(timeout=15_000)
        page.screenshot(path=str(artifacts_dir() / "follow-log.png"), full_page=True)
        assert not errors, errors
        page.close()
