"""The progress bar moving on a running task's record page, in a real browser (Chromium).

The task's reports are written as a worker writes them (a pad under the claim's fence);
the page's Live toggle fetches the bar alone every 2 s and swaps it in. Skipped when
Chromium or Playwright is missing.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_ledger.core.ledger import Ledger
from django_ledger.core.progress import ProgressPad
from tests.support.browser import log_in, new_page

pytest_plugins = ["tests.support.browser_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)
PAYLOAD = '{"args":[1,2],"kwargs":{},"task":"tests.support.tasks_app.tasks.add","v":1}'


def test_the_live_toggle_moves_the_bar(
    browser: Any, live_server: Any, admin_ledger: Ledger, django_user_model: Any
) -> None:
    admin_ledger.admit("import-7", PAYLOAD)
    claim = admin_ledger.claim("w-1")
    assert claim is not None
    pad = ProgressPad(admin_ledger, "import-7", claim.fence, interval=1.0)
    pad.set_progress(10, 100, "rows of January")
    pad.flush()
    page = log_in(new_page(browser, 1280), live_server, django_user_model)
    url = reverse("admin:django_ledger_record_change", args=(quote("default import-7"),))
    page.goto(f"{live_server.url}{url}")
    bar = '#task-progress [data-field="progress-bar"]'
    assert page.locator(bar).get_attribute("value") == "10"
    assert "rows of January" in page.locator("#task-progress").inner_text()
    page.check("#ledger-live")
    pad.set_progress(80, 100, "rows of August")
    pad.flush()
    page.wait_for_function(
        "document.querySelector('#task-progress [data-field=\"progress-bar\"]')"
        ".getAttribute('value') === '80'",
        timeout=15_000,
    )
    assert "80 of 100 (80%)" in page.locator("#task-progress").inner_text()
    assert "rows of August" in page.locator("#task-progress").inner_text()
