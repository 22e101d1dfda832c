"""The schedule form in a real browser (Debian's Chromium driven by Playwright).

Adds a schedule with a bad cron line (the error shows under the field, nothing is
saved), fixes it, saves, edits it, and saves ``schedule_form.png`` under
``tests/screenshots/`` (or ``$LEDGER_SCREENSHOTS``). Skipped when Chromium or
Playwright is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

import tests.support.tasks_app.tasks  # noqa: F401 - the project imported its tasks
from django_ledger.core.schedule import definitions_key, state_key
from django_ledger.services import runtime_schedules
from tests.support.browser import fast_passwords, log_in, new_page

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / os.environ.get("LEDGER_SCREENSHOTS", "tests/screenshots")

pytestmark = pytest.mark.django_db(transaction=True)
pytest_plugins = ["tests.support.browser_fixtures"]


@pytest.fixture
def stored_namespace(settings: Any, namespace: str, redis_client: redis.Redis) -> Iterator[str]:
    fast_passwords(settings)
    settings.LEDGER = {
        **settings.LEDGER,
        "NAMESPACE": namespace,
        "DISPATCH": {"NAMESPACE": namespace},
        "SCHEDULES": {},
    }
    yield namespace
    redis_client.delete(state_key(namespace), definitions_key(namespace))


def test_the_schedule_form_refuses_a_bad_cron_line_then_saves_and_edits(
    live_server: Any, browser: Any, django_user_model: Any, stored_namespace: str
) -> None:
    page = new_page(browser, 1280)
    log_in(page, live_server, django_user_model, then="/admin/django_ledger/schedule/", wait=None)
    page.click("#add-schedule")
    page.fill("#id_key", "nightly")
    page.fill("#id_task", "tests.support.tasks_app.tasks.add")
    page.fill("#id_cron", "0 25 * * *")
    page.fill("#id_args", "[1, 2]")
    page.click("#schedule-form input[type=submit]")

    error = page.inner_text(".field-cron .errorlist")
    assert "0 25 * * *" in error
    assert runtime_schedules.stored().definitions == {}
    assert "takes effect from its next fire" in page.inner_text("#effect-note")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "schedule_form.png"), full_page=True)

    page.fill("#id_cron", "0 5 * * *")
    page.select_option("#id_misfire", "all")
    page.click("#schedule-form input[type=submit]")
    assert "Saved schedule nightly." in page.inner_text(".messagelist")
    assert "Stored at run time" in page.inner_text("#schedule-origin")

    page.click("#edit-button")
    assert page.input_value("#id_cron") == "0 5 * * *"
    page.fill("#id_timezone", "Europe/Paris")
    page.click("#schedule-form input[type=submit]")
    assert "Saved schedule nightly." in page.inner_text(".messagelist")
    saved = runtime_schedules.stored().definitions["nightly"]
    assert saved.version == 2 and saved.entry["TIMEZONE"] == "Europe/Paris"
    assert saved.entry["MISFIRE"] == "all" and saved.by == "operator"
