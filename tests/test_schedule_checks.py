"""Every bad setting of ``LEDGER['SCHEDULES']`` gets its system check id (E070 to E079)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from django_ledger.checks.schedules import check_schedules
from django_ledger.checks.settings import check_settings
from django_ledger.core.schedule import Cron, Every, Misfire
from django_ledger.services import scheduler

TASK = "tests.tasks_app.tasks.noop"
GOOD = {"TASK": TASK, "CRON": "0 3 * * *", "TIMEZONE": "Europe/Paris"}


def ids_for(settings: Any, schedules: Any) -> list[str]:
    settings.LEDGER = {**settings.LEDGER, "SCHEDULES": schedules}
    return [message.id for message in check_schedules()]


def test_good_schedules_pass_every_check(settings: Any) -> None:
    schedules = {
        "nightly": GOOD,
        "heartbeat": {"TASK": TASK, "EVERY": timedelta(minutes=5), "QUEUE": "emails"},
        "full": {
            **GOOD,
            "ARGS": [1, "two"],
            "KWARGS": {"three": [3]},
            "PRIORITY": -100,
            "MISFIRE": "all",
            "GRACE": 600,
            "ENABLED": False,
        },
    }

    assert ids_for(settings, schedules) == []
    assert [m.id for m in check_settings()] == []  # SCHEDULES is a known top-level key
    found = scheduler.schedules()
    assert isinstance(found["nightly"].timing, Cron)
    assert isinstance(found["heartbeat"].timing, Every) and found["heartbeat"].every == 300
    assert found["full"].misfire is Misfire.ALL and found["full"].grace == timedelta(minutes=10)
    assert found["full"].args == (1, "two") and found["nightly"].queue == "default"


@pytest.mark.parametrize(
    ("schedules", "expected"),
    [
        (["not", "a", "dict"], "E070"),
        ({"nightly": "0 3 * * *"}, "E070"),
        ({"bad key": GOOD}, "E071"),
        ({"": GOOD}, "E071"),
        ({"nightly": {**GOOD, "CRONS": "0 3 * * *"}}, "E072"),
        ({"nightly": {"CRON": "0 3 * * *"}}, "E073"),
        ({"nightly": {**GOOD, "TASK": "tests.nowhere.nothing"}}, "E073"),
        ({"nightly": {**GOOD, "TASK": "noop"}}, "E073"),
        ({"nightly": {"TASK": TASK}}, "E074"),
        ({"nightly": {**GOOD, "EVERY": 60}}, "E074"),
        ({"nightly": {**GOOD, "CRON": "61 * * * *"}}, "E075"),
        ({"nightly": {**GOOD, "CRON": "every night"}}, "E075"),
        ({"nightly": {**GOOD, "CRON": "0 0 30 2 *"}}, "E075"),
        ({"beat": {"TASK": TASK, "EVERY": 0}}, "E076"),
        ({"beat": {"TASK": TASK, "EVERY": timedelta(milliseconds=500)}}, "E076"),
        ({"beat": {"TASK": TASK, "EVERY": "5m"}}, "E076"),
        ({"nightly": {**GOOD, "TIMEZONE": "Europe/Atlantis"}}, "E077"),
        ({"nightly": {**GOOD, "QUEUE": "nowhere"}}, "E078"),
        ({"nightly": {**GOOD, "QUEUE": 7}}, "E078"),
        ({"nightly": {**GOOD, "ARGS": "1, 2"}}, "E079"),
        ({"nightly": {**GOOD, "ARGS": [object()]}}, "E079"),
        ({"nightly": {**GOOD, "KWARGS": {1: "one"}}}, "E079"),
        ({"nightly": {**GOOD, "KWARGS": {"at": timedelta(1)}}}, "E079"),
        ({"nightly": {**GOOD, "PRIORITY": 101}}, "E079"),
        ({"nightly": {**GOOD, "PRIORITY": True}}, "E079"),
        ({"nightly": {**GOOD, "MISFIRE": "never"}}, "E079"),
        ({"nightly": {**GOOD, "GRACE": 0}}, "E079"),
        ({"nightly": {**GOOD, "GRACE": "1h"}}, "E079"),
        ({"nightly": {**GOOD, "ENABLED": "yes"}}, "E079"),
    ],
)
def test_each_bad_setting_has_its_id(settings: Any, schedules: Any, expected: str) -> None:
    settings.LEDGER = {**settings.LEDGER, "SCHEDULES": schedules}

    messages = check_schedules()

    assert [m.id for m in messages] == [f"django_ledger.{expected}"]
    assert all(m.hint and m.obj.startswith("LEDGER['SCHEDULES']") for m in messages)
    with pytest.raises(ImproperlyConfigured, match=expected):
        scheduler.schedules()


def test_a_task_queue_that_is_not_configured_is_named(settings: Any) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "QUEUES": {"emails": {}},
        "SCHEDULES": {"nightly": GOOD},
    }

    (message,) = check_schedules()

    assert message.id == "django_ledger.E078"
    assert "the task's queue_name 'default'" in message.msg


def test_the_checks_run_with_manage_py_check(settings: Any) -> None:
    settings.LEDGER = {**settings.LEDGER, "SCHEDULES": {"nightly": {**GOOD, "TIMEZONE": "Mars"}}}

    with pytest.raises(SystemCheckError, match=r"django_ledger\.E077"):
        call_command("check", "--tag", "django_ledger")


def test_without_strict_a_bad_schedule_is_left_out(settings: Any) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "SCHEDULES": {"good": GOOD, "bad": {**GOOD, "CRON": "nope"}},
    }

    assert list(scheduler.schedules(strict=False)) == ["good"]
