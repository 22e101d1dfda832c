"""The ledger admin in a real browser: Debian's Chromium driven by Playwright.

Logs in, filters records by a due-time range, opens a record, retries it and sees the
change, and saves screenshots of the records list, a record, the quarantine and the
queue health page under ``tests/screenshots/`` (or the folder named by the environment
variable ``LEDGER_SCREENSHOTS``: ``LEDGER_SCREENSHOTS=docs/screenshots`` refreshes the
ones the docs show). Skipped when Chromium or Playwright is
missing (CI installs both: the ``chromium`` Debian package and ``playwright`` from
PyPI; never ``playwright install``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis

from django_ledger.conf import get_ledger
from django_ledger.core.ledger import Ledger

CHROMIUM = os.environ.get("CHROMIUM_BIN", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = ROOT / os.environ.get("LEDGER_SCREENSHOTS", "tests/screenshots")
HOUR = 3_600_000
PASSWORD = "correct horse battery staple"

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
if not (os.access(CHROMIUM, os.X_OK) or shutil.which("chromium")):
    pytest.skip(f"no chromium at {CHROMIUM}", allow_module_level=True)

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def admin_ledger(namespace: str, settings: Any) -> Ledger:
    settings.LEDGER = {**settings.LEDGER, "NAMESPACE": namespace}
    # One fast hash for the one login: the default hasher is slow on purpose.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    return get_ledger("default")


@pytest.fixture
def browser_page(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    # Playwright's sync API runs an event loop in this thread; Django's ORM calls in
    # the test's teardown are still synchronous and safe.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    executable = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable,
            headless=True,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            context = browser.new_context(viewport={"width": 1600, "height": 900})
            yield context.new_page()
        finally:
            browser.close()


def utc(ms: int) -> tuple[str, str]:
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%d"), moment.strftime("%H:%M:%S")


def listed(page: Any) -> list[str]:
    return [
        text.strip()
        for text in page.locator("#result_list th.field-request_id a").all_inner_texts()
    ]


def test_filter_open_retry_and_screenshots(
    live_server: Any,
    django_user_model: Any,
    admin_ledger: Ledger,
    redis_client: redis.Redis,
    browser_page: Any,
) -> None:
    page = browser_page
    django_user_model.objects.create_superuser("operator", "operator@example.com", PASSWORD)
    for i in range(12):
        admin_ledger.admit(
            f"order-{i:03d}", f'{{"order": {i}, "lines": [{i}, {i + 1}]}}', delay=i * 1800
        )
    admin_ledger.claim("worker-1", lease=600)
    get_ledger("emails").admit("welcome-1", '{"to": "ann@example.com"}')
    redis_client.hset(admin_ledger.records_key, "order-bad", b"\x00garbled<bytes>\xff")
    admin_ledger.repair_records([("order-bad", b"\x00garbled<bytes>\xff")])
    now = admin_ledger.server_time_ms()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"{live_server.url}/admin/")
    page.fill("#id_username", "operator")
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_selector("#content-main")
    page.click("#django_ledger-record a")
    page.wait_for_selector("#result_list")
    assert "order-000" in listed(page)
    page.screenshot(path=str(SCREENSHOTS / "records-list.png"), full_page=True)

    # Pending records due between 1 h 15 min and 3 h 15 min from now: 3 to 6 half-hours.
    form = page.locator("div.admindatefilter form").first
    low_date, low_time = utc(now + HOUR + HOUR // 4)
    high_date, high_time = utc(now + 3 * HOUR + HOUR // 4)
    form.locator("input[name=due_at__range__gte_0]").fill(low_date)
    form.locator("input[name=due_at__range__gte_1]").fill(low_time)
    form.locator("input[name=due_at__range__lte_0]").fill(high_date)
    form.locator("input[name=due_at__range__lte_1]").fill(high_time)
    form.locator("input[type=submit]").click()
    page.wait_for_url("**due_at__range__gte_0=*")
    assert listed(page) == ["order-003", "order-004", "order-005", "order-006"]

    page.click("#result_list >> text=order-004")
    page.wait_for_selector("#record-fields")
    assert page.locator("[data-field=state]").inner_text() == "PENDING"
    due_before = page.locator("[data-field=due-at]").inner_text()
    assert page.locator("#payload").inner_text().startswith('{\n  "order": 4,')
    page.screenshot(path=str(SCREENSHOTS / "record.png"), full_page=True)

    page.click("[data-action=retry]")
    page.wait_for_selector("#confirm-items")
    page.click("input[type=submit]")
    page.wait_for_selector("#record-fields")
    assert "Retried now: 1 record." in page.locator("ul.messagelist").inner_text()
    assert page.locator("[data-field=state]").inner_text() == "PENDING"
    assert page.locator("[data-field=due-at]").inner_text() != due_before
    record = admin_ledger.resolve("order-004")
    assert record is not None and record.due_at <= admin_ledger.server_time_ms()

    # Back to the filtered list: the retried record is due now, out of the range.
    page.go_back()
    page.go_back()
    page.go_back()
    page.reload()
    page.wait_for_selector("#result_list")
    assert listed(page) == ["order-003", "order-005", "order-006"]

    page.goto(f"{live_server.url}/admin/django_ledger/quarantinedrecord/")
    page.wait_for_selector("#result_list")
    assert listed(page) == ["order-bad"]
    page.screenshot(path=str(SCREENSHOTS / "quarantine.png"), full_page=True)

    page.goto(f"{live_server.url}/admin/django_ledger/queue/default/change/")
    page.wait_for_selector("#figures")
    assert page.locator("[data-figure=claimed]").inner_text() == "1"
    page.screenshot(path=str(SCREENSHOTS / "queue-health.png"), full_page=True)
