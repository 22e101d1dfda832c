"""The Schedules page in a real browser (Debian's Chromium driven by Playwright).

Logs in, opens the list and a schedule, pauses it, fires it now, and saves
``schedules.png`` and ``schedule.png`` under ``tests/screenshots/`` (or
``$LEDGER_SCREENSHOTS``). Skipped when Chromium or Playwright is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_ledger.core.schedule import state_key
from django_ledger.services import scheduler
from tests.support.browser import fast_passwords, log_in, new_page

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / os.environ.get("LEDGER_SCREENSHOTS", "tests/screenshots")
TASK = "tests.support.tasks_app.tasks.noop"
#: A task declared for queue "emails" (a schedule's QUEUE must be one of its task's, E093).
EMAILS_TASK = "tests.support.tasks_app.tasks.on_emails"

pytestmark = pytest.mark.django_db(transaction=True)
pytest_plugins = ["tests.support.browser_fixtures"]


@pytest.fixture
def schedules(settings: Any, namespace: str, redis_client: redis.Redis) -> Iterator[str]:
    fast_passwords(settings)
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "DISPATCH": {"NAMESPACE": namespace},
        "SCHEDULES": {
            "nightly-report": {
                "TASK": TASK,
                "CRON": "30 2 * * *",
                "TIMEZONE": "Europe/Paris",
                "KWARGS": {"format": "pdf"},
            },
            "heartbeat": {"TASK": EMAILS_TASK, "ARGS": [1], "EVERY": 300, "QUEUE": "emails"},
            "feed": {"TASK": TASK, "CRON": "*/10 * * * *", "MISFIRE": "all", "PRIORITY": 10},
        },
    }
    yield namespace
    redis_client.delete(state_key(namespace))


def test_pause_and_fire_now_from_the_schedules_page(
    live_server: Any, browser: Any, django_user_model: Any, schedules: str
) -> None:
    store = scheduler.store()
    now = store.server_time_ms() // 1000
    store.set_through("heartbeat", (now // 300 - 1) * 300 - 1)  # one fire due
    scheduler.Scheduler("node-a").tick()
    page = log_in(new_page(browser), live_server, django_user_model)

    page.click("text=Schedules")
    page.wait_for_selector("#schedules")
    assert page.locator("#schedules tbody tr").count() == 3
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "schedules.png"), full_page=True)

    page.click("text=nightly-report")
    page.click("#pause-button")
    page.click("input[type=submit]")
    assert "paused by operator" in page.inner_text("#schedule-state")
    page.click("#trigger-button")
    page.click("input[type=submit]")
    assert "Fired schedule nightly-report now" in page.inner_text(".messagelist")
    assert "(manual)" in page.inner_text("#dispatches")
    page.screenshot(path=str(SCREENSHOTS / "schedule.png"), full_page=True)

    page.click("#dispatches a")  # the record the manual fire admitted
    assert "schedule:nightly-report:manual:" in page.inner_text("#content")


def test_the_schedules_page_fits_a_1280_px_screen(
    live_server: Any, django_user_model: Any, schedules: str, browser: Any
) -> None:
    scheduler.Scheduler("node-a").tick()
    page = new_page(browser, 1280)
    log_in(
        page,
        live_server,
        django_user_model,
        then="/admin/django_ledger/schedule/",
        wait="#schedules",
    )
    # Nothing wider than the screen: no sideways scrolling to read a schedule.
    width = page.evaluate("document.documentElement.scrollWidth")
    table = page.evaluate("document.querySelector('#schedules').getBoundingClientRect().right")
    assert width <= 1280 and table <= 1280, (width, table)
