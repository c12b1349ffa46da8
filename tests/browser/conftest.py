"""Shared by the browser tests: one headless Chromium (Debian's, see scripts/setup.sh)."""

import pytest
from playwright.sync_api import sync_playwright


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
        yield browser
        browser.close()
