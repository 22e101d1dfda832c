"""The headless Chromium the admin's browser tests drive (Debian's, through Playwright).

``pytest_plugins = ["tests.support.browser_fixtures"]`` in a test module gives it ``browser``;
the test skips where Playwright or Chromium is missing.
(``tests/support/browser.py`` opens pages and logs them in.)
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture
def browser(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A headless Chromium, closed after the test."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    executable = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if executable is None:
        pytest.skip(f"no chromium at {CHROMIUM}")
    # Playwright's sync API runs an event loop in this thread; Django's ORM calls in
    # the test's teardown are still synchronous and safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()
