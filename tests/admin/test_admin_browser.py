"""The ledger admin in a real browser: Debian's Chromium driven by Playwright.

Logs in, filters records by a due-time range, opens a record, retries it and sees the
change, and saves screenshots of the records list, a record, the quarantine and the
queue health page under ``tests/screenshots/`` (or the folder named by the environment
variable ``LEDGER_SCREENSHOTS``: ``LEDGER_SCREENSHOTS=docs/screenshots`` refreshes the
ones the docs show). A third checks that the records list and the Workers page fit 1,280 px with the
admin's navigation sidebar open (``*-1280.png``). A second test looks at the demo's records at 1,400 px for what a
user must not see: a list cut at the right or ids wrapped, double full stops, a
confirmation page without its last heading, a "View site" that leads nowhere, an ended
record "due ... ago", settings in Python's spelling; its screenshots (``*-1400.png``) always go to
``tests/screenshots/``.
Skipped when Chromium or Playwright is missing (CI installs both: the ``chromium``
Debian package and ``playwright`` from PyPI; never ``playwright install``).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.admin.utils import quote
from django.urls import reverse

from django_ledger.admin.lookups import join_key
from django_ledger.conf import get_ledger
from django_ledger.core.ledger import Ledger
from testproject.demo import seed_demo
from tests.support.browser import log_in, new_page
from tests.support.redis_server import free_port

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / os.environ.get("LEDGER_SCREENSHOTS", "tests/screenshots")
#: The 1,400 px screenshots are for looking at, not for the docs: always here.
CHECKS = ROOT / "tests" / "screenshots"
HOUR = 3_600_000

pytest_plugins = ["tests.support.browser_fixtures"]
pytestmark = pytest.mark.django_db(transaction=True)


def record_url(live_server: Any, queue: str, request_id: str) -> str:
    key = quote(join_key(queue, request_id))
    return live_server.url + reverse("admin:django_ledger_record_change", args=(key,))


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
    browser: Any,
) -> None:
    page = new_page(browser, 1600)
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

    log_in(page, live_server, django_user_model)
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


def fits(page: Any, *one_line: str) -> None:
    """Assert the changelist shows every column, and each cell of ``one_line`` on one line."""
    widths = page.evaluate(
        "() => { const r = document.querySelector('#changelist .results');"
        " return [r.scrollWidth, r.clientWidth]; }"
    )
    assert widths[0] <= widths[1], f"the list is cut: {widths[0]} px wide in {widths[1]}"
    table = page.locator("#result_list").bounding_box()
    assert table is not None and table["x"] + table["width"] <= 1400
    for selector in one_line:
        lines = page.evaluate(
            "(s) => [...document.querySelectorAll('#result_list ' + s)].map(e => {"
            " const range = document.createRange(); range.selectNodeContents(e);"
            " return [e.textContent, range.getClientRects().length]; })",
            selector,
        )
        assert lines and all(count == 1 for _, count in lines), lines


def test_what_a_user_saw_at_1400_px(
    live_server: Any,
    django_user_model: Any,
    admin_ledger: Ledger,
    browser: Any,
    settings: Any,
) -> None:
    page = new_page(browser)
    for queue in ("default", "emails"):
        seed_demo(get_ledger(queue))
    admin_ledger.admit("order-1043:receipt", '{"to": "ada@example.com"}')
    CHECKS.mkdir(parents=True, exist_ok=True)
    log_in(page, live_server, django_user_model)
    # "View site" led to a 404: the project has no site but the admin.
    assert page.locator("#user-tools a", has_text="View site").count() == 0
    assert "VIEW SITE" not in page.locator("#user-tools").inner_text().upper()
    page.goto(f"{live_server.url}/")
    assert page.url.endswith("/admin/")

    # The records list fits: no column cut at the right, every id and owner on one line.
    page.goto(f"{live_server.url}/admin/django_ledger/record/")
    page.wait_for_selector("#result_list")
    page.screenshot(path=str(CHECKS / "records-list-1400.png"), full_page=True)
    fits(page, "th.field-request_id a", "td.field-owner", "td.field-record_state")

    # A date that does not parse: one full stop, not two.
    page.goto(f"{live_server.url}/admin/django_ledger/record/?due_at__range__gte_0=2026-02-30")
    page.wait_for_selector("ul.messagelist")
    message = page.locator("ul.messagelist").inner_text()
    assert "Enter a valid date." in message and ".." not in message, message

    # The confirmation page for two records: every column headed, said of two records.
    page.goto(f"{live_server.url}/admin/django_ledger/record/?q=demo-pending")
    page.wait_for_selector("#result_list")
    page.locator("#result_list input.action-select").first.check()
    page.locator("#result_list input.action-select").nth(1).check()
    page.select_option("select[name=action]", "retry_selected")
    page.click("button[name=index]")
    page.wait_for_selector("#confirm-items")
    page.screenshot(path=str(CHECKS / "confirm-two-1400.png"), full_page=True)
    headings = page.locator("#confirm-items thead th").all_inner_texts()
    assert len(headings) == 5 and all(text.strip() for text in headings), headings
    warning = page.locator("#confirm-warning").inner_text()
    assert warning.startswith("The records go back") and "The record " not in warning
    assert page.locator("#content").inner_text().count("Each record is acted on") == 1

    # An ended record is not "due ... ago".
    page.goto(record_url(live_server, "default", "demo-completed"))
    page.wait_for_selector("#record-fields")
    due_row = page.locator("#record-fields tr", has=page.locator("[data-field=due-at]"))
    assert "ago" not in due_row.inner_text() and "in " not in due_row.inner_text()
    page.screenshot(path=str(CHECKS / "record-ended-1400.png"), full_page=True)
    page.goto(record_url(live_server, "default", "demo-later"))
    page.wait_for_selector("#record-fields")
    due_row = page.locator("#record-fields tr", has=page.locator("[data-field=due-at]"))
    assert "in 59 min" in due_row.inner_text() or "in 1 h" in due_row.inner_text()

    # The demo's corrupt bytes look like a torn record, not like a label.
    page.goto(f"{live_server.url}/admin/django_ledger/quarantinedrecord/?queue=default")
    page.wait_for_selector("#result_list")
    page.screenshot(path=str(CHECKS / "quarantine-1400.png"), full_page=True)
    fits(page, "th.field-request_id a")
    listing = page.locator("#result_list").inner_text()
    assert "not a record" not in listing and "\\x00" in listing
    assert page.locator("#result_list td.field-error").first.inner_text() == "checksum mismatch"

    # Queue settings as people read them.
    page.goto(f"{live_server.url}/admin/django_ledger/queue/default/change/")
    page.wait_for_selector("#queue-settings")
    page.screenshot(path=str(CHECKS / "queue-health-1400.png"), full_page=True)
    setting = {
        name: page.locator(f"[data-setting={name}]").inner_text()
        for name in (
            "most-records",
            "most-payload-bytes",
            "retention-of-ended-records",
            "default-lease",
        )
    }
    assert setting == {
        "most-records": "100,000",
        "most-payload-bytes": "1,048,576 bytes (1 MiB)",
        "retention-of-ended-records": "7 days",
        "default-lease": "30 seconds",
    }

    # Redis gone: the page says so in one sentence with one full stop.
    settings.LEDGER = {**settings.LEDGER, "CONNECTION": f"redis://127.0.0.1:{free_port()}/0"}
    answer = page.goto(f"{live_server.url}/admin/django_ledger/record/")
    assert answer is not None and answer.status == 503
    error = page.locator("p.errornote").inner_text()
    assert "Connection refused." in error and ".." not in error, error
    page.screenshot(path=str(CHECKS / "unavailable-1400.png"), full_page=True)


#: What each page's layout is measured by: the document's width, each table's width
#: beside its container's (a table wider than its box is cut or hidden).
MEASURE = """() => ({
  viewport: window.innerWidth,
  document: document.documentElement.scrollWidth,
  header: Math.ceil(document.querySelector('#header').getBoundingClientRect().right),
  content: Math.ceil(document.querySelector('#content').getBoundingClientRect().right),
  tables: [...document.querySelectorAll('#content table')].map(t => ({
    table: t.id || t.className || t.tagName,
    width: Math.ceil(t.getBoundingClientRect().width),
    box: t.parentElement.clientWidth,
  })),
})"""


def assert_fits(page: Any, what: str) -> None:
    measured = page.evaluate(MEASURE)
    assert measured["document"] <= measured["viewport"], (what, measured)
    assert measured["content"] <= measured["header"], (what, measured)
    assert measured["tables"], (what, "no table measured")
    for table in measured["tables"]:
        assert table["width"] <= table["box"], (what, table)


def test_the_records_list_and_the_workers_page_fit_1280_px(
    live_server: Any,
    django_user_model: Any,
    admin_ledger: Ledger,
    browser: Any,
    redis_client: redis.Redis,
    namespace: str,
) -> None:
    from django_ledger.core.worker import Heartbeats, WorkerInfo

    page = new_page(browser, 1280)
    for queue in ("default", "emails"):
        seed_demo(get_ledger(queue))
    admin_ledger.admit("order-1043:receipt", '{"to": "ada@example.com"}')
    # A record held by a worker named as `ledger_worker` names it (host:pid:tag).
    admin_ledger.admit("order-1044:send-receipt-email", '{"to": "bob@example.com"}')
    assert admin_ledger.claim("web-1.shop-production.internal:48211:a1b2c1", lease=600)
    now = admin_ledger.server_time_ms()
    # Two workers as `ledger_worker` names them (host:pid:tag), busy on both queues.
    for n in (1, 2):
        running = [
            {
                "id": f"order-10{n}{i}:send-receipt-email",
                "queue": ("default", "emails")[i % 2],
                "name": "shop.tasks.send_receipt_email",
                "attempt": 1 + i,
                "since": now - 1000 * i,
            }
            for i in range(4)
        ]
        info = WorkerInfo(
            worker_id=f"web-{n}.shop-production.internal:4821{n}:a1b2c{n}",
            host=f"web-{n}.shop-production.internal",
            pid=48210 + n,
            queues=["default", "emails"],
            concurrency=16,
            started_at=now - 3 * HOUR,
            beat_at=now,
            processed=1_234_567,
            failed=12_345,
            retried=2_345,
            lost=17,
            running=running,
        )
        Heartbeats(redis_client, namespace).beat(info, ttl_s=60)
    CHECKS.mkdir(parents=True, exist_ok=True)
    log_in(page, live_server, django_user_model)

    page.goto(f"{live_server.url}/admin/django_ledger/record/")
    page.wait_for_selector("#result_list")
    page.screenshot(path=str(CHECKS / "records-list-1280.png"), full_page=True)
    assert_fits(page, "records list")
    # Every column shows, its heading included: the last ones were cut or hidden.
    for heading in ("Lease until", "Updated at"):
        cell = page.locator("#result_list thead th", has_text=heading).bounding_box()
        assert cell is not None and cell["x"] + cell["width"] <= 1280, heading
    # The claimed records alone: each row's owner and lease are filled in.
    page.goto(f"{live_server.url}/admin/django_ledger/record/?state=CLAIMED")
    page.wait_for_selector("#result_list")
    assert page.locator("#result_list tbody tr").count() >= 1
    assert_fits(page, "claimed records")
    for heading in ("Lease until", "Updated at"):
        cell = page.locator("#result_list thead th", has_text=heading).bounding_box()
        assert cell is not None and cell["x"] + cell["width"] <= 1280, heading
    last = page.locator("#result_list tbody tr td:last-child").first.bounding_box()
    assert last is not None and last["x"] + last["width"] <= 1280

    page.goto(f"{live_server.url}/admin/django_ledger/worker/")
    page.wait_for_selector("#workers")
    page.screenshot(path=str(CHECKS / "workers-1280.png"), full_page=True)
    assert page.locator("#workers tr[data-worker]").count() == 2
    assert_fits(page, "workers page")
