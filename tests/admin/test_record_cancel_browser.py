"""The record page's Cancel button in a real browser (Chromium), on a running record.

From the record's page through the confirmation page to the message that says the task
was told to stop, and the record FAILED with the cancel's error. Skipped when Chromium
or Playwright is missing.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_ledger.admin.lookups import join_key
from django_ledger.core.ledger import Ledger
from django_ledger.core.records import State
from tests.support.browser import log_in, new_page

pytest_plugins = ["tests.support.browser_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)


def test_cancel_a_running_record_from_its_page(
    browser: Any, live_server: Any, admin_ledger: Ledger, django_user_model: Any
) -> None:
    admin_ledger.admit("report-7", "x")
    claim = admin_ledger.claim("worker-1", lease=600)
    assert claim is not None
    page = log_in(new_page(browser), live_server, django_user_model)
    key = quote(join_key("default", "report-7"))
    page.goto(live_server.url + reverse("admin:django_ledger_record_change", args=(key,)))
    page.click('a[data-action="cancel"]')
    page.wait_for_selector("#confirm-warning")
    assert "its worker tells it to stop" in page.locator("#confirm-warning").inner_text()
    page.click(".submit-row input[type=submit]")
    page.wait_for_selector("ul.messagelist")
    said = page.locator("ul.messagelist").inner_text()
    assert "Record report-7 was running: it ended FAILED now, its worker is told to stop" in said
    assert "Cancelled: 1 record." in said
    assert page.locator('a[data-action="cancel"]').count() == 0  # ended: not offered again
    record = admin_ledger.resolve("report-7")
    assert record is not None and record.state is State.FAILED and record.fence > claim.fence
