"""System checks of the task backend: stable ids, one per kind of mistake, each with a hint."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import django
import pytest
from django.core import checks
from django.test import override_settings

from django_ledger.checks.tasks import check_tasks
from tests.support.tasks_helpers import ROOT

BACKEND = "django_ledger.tasks.LedgerBackend"


def ids(messages: list[Any]) -> list[str]:
    return sorted(message.id for message in messages)


def tasks_with(**params: Any) -> dict[str, Any]:
    return {"default": {"BACKEND": BACKEND, **params}}


def test_the_test_project_passes() -> None:
    assert check_tasks() == []


def test_the_check_is_registered() -> None:
    # Under the ledger's tag, or the task framework's check of each backend (tasks).
    with override_settings(TASKS=tasks_with(QUEUES=["default", "nowhere"])):
        found = checks.run_checks()
    assert "django_ledger.E060" in ids(found)


def test_the_backends_own_check_names_a_queue_missing_from_ledger() -> None:
    from django_ledger.tasks.compat import task_backends

    with override_settings(TASKS=tasks_with(QUEUES=["default", "nowhere"])):
        [message] = task_backends["default"].check()
        # manage.py check runs both the backend's check and the ledger's: said once.
        found = [m for m in checks.run_checks() if m.id == "django_ledger.E060"]
    assert message.id == "django_ledger.E060"
    assert message.obj == "TASKS['default']['QUEUES']" and "'nowhere'" in message.msg
    assert found == [message]


def test_rangefilter_is_needed_only_where_the_admin_is_installed(settings: Any) -> None:
    from django_ledger.checks import check_rangefilter

    without = [app for app in settings.INSTALLED_APPS if app != "rangefilter"]
    with override_settings(INSTALLED_APPS=without):
        assert ids(check_rangefilter()) == ["django_ledger.E040"]
    no_admin = [app for app in without if app != "django.contrib.admin"]
    with override_settings(INSTALLED_APPS=no_admin):
        assert check_rangefilter() == []


def test_a_task_queue_missing_from_ledger_is_e060() -> None:
    with override_settings(TASKS=tasks_with(QUEUES=["default", "nowhere"])):
        [message] = check_tasks()
    assert message.id == "django_ledger.E060"
    assert "'nowhere'" in message.msg and message.hint
    assert message.obj == "TASKS['default']['QUEUES']"


@pytest.mark.parametrize(
    ("options", "obj"),
    [
        ({"MAX_RESULT_BYTES": "big"}, "TASKS['default']['OPTIONS']['MAX_RESULT_BYTES']"),
        ({"MAX_RESULT_BYTES": 0}, "TASKS['default']['OPTIONS']['MAX_RESULT_BYTES']"),
        ({"RESULT_BYTES": 10}, "TASKS['default']['OPTIONS']['RESULT_BYTES']"),
        (["MAX_RESULT_BYTES"], "TASKS['default']['OPTIONS']"),
    ],
)
def test_a_backend_option_that_does_not_parse_is_e061(options: Any, obj: str) -> None:
    with override_settings(TASKS=tasks_with(OPTIONS=options)):
        [message] = check_tasks()
    assert (message.id, message.obj) == ("django_ledger.E061", obj)
    assert message.hint


def test_results_larger_than_a_payload_may_be_are_e062(settings: Any) -> None:
    ledger = {**settings.LEDGER, "QUEUES": {"default": {"MAX_PAYLOAD_BYTES": 1000}}}
    with override_settings(LEDGER=ledger, TASKS=tasks_with(OPTIONS={"MAX_RESULT_BYTES": 1001})):
        [message] = check_tasks()
    assert message.id == "django_ledger.E062"
    assert "1,001" in message.msg and "1,000" in message.msg
    with override_settings(LEDGER=ledger, TASKS=tasks_with(OPTIONS={"MAX_RESULT_BYTES": 1000})):
        assert check_tasks() == []


def test_the_default_result_limit_is_held_to_ledger_defaults(settings: Any) -> None:
    ledger = {**settings.LEDGER, "DEFAULTS": {"MAX_PAYLOAD_BYTES": 4096}}
    with override_settings(LEDGER=ledger, TASKS=tasks_with(QUEUES=["default"])):
        assert ids(check_tasks()) == ["django_ledger.E062"]


@pytest.mark.parametrize(
    "overrides",
    [
        {"BACKOFF_BASE": -1},
        {"BACKOFF_CAP": "soon"},
        {"RETRY_ON": "ValueError"},
        {"RETRY_ON": ["NoSuchError"]},
        {"TIMEOUT": float("inf")},
        {"UNIQUE": "yes"},
        {"BACKOFF_BASE": 60, "BACKOFF_CAP": 5},
    ],
)
def test_a_queue_task_option_that_does_not_parse_is_e063(
    settings: Any, overrides: dict[str, Any]
) -> None:
    ledger = {**settings.LEDGER, "QUEUES": {**settings.LEDGER["QUEUES"], "emails": overrides}}
    with override_settings(LEDGER=ledger):
        [message] = check_tasks()
    assert message.id == "django_ledger.E063"
    assert message.obj.startswith("LEDGER['QUEUES']['emails']") and message.hint


def test_good_queue_task_options_pass(settings: Any) -> None:
    from datetime import timedelta

    good = {
        "BACKOFF_BASE": timedelta(seconds=1),
        "BACKOFF_CAP": 60,
        "RETRY_ON": [ConnectionError, "shop.errors.Busy", "TimeoutError"],
        "TIMEOUT": 0,
        "UNIQUE": True,
    }
    ledger = {**settings.LEDGER, "QUEUES": {**settings.LEDGER["QUEUES"], "emails": good}}
    with override_settings(LEDGER=ledger):
        assert check_tasks() == []


@pytest.mark.skipif(django.VERSION >= (6, 0), reason="the backport is for Django 5.2")
def test_the_backport_outside_installed_apps_is_w060() -> None:
    from django.test import modify_settings

    with modify_settings(INSTALLED_APPS={"remove": ["django_tasks"]}):
        assert ids(check_tasks()) == ["django_ledger.W060"]


@pytest.mark.skipif(django.VERSION >= (6, 0), reason="the backport is for Django 5.2")
def test_a_missing_task_framework_is_e064() -> None:
    probe = """
import sys

sys.modules["django_tasks"] = None  # as if the backport were not installed
import os
os.environ["DJANGO_SETTINGS_MODULE"] = "testproject.settings"
import django
django.setup()
from django_ledger.checks.tasks import check_tasks
print(sorted(m.id for m in check_tasks()))
print([m.hint for m in check_tasks()])
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "['django_ledger.E064']"
    assert "django-task-ledger[tasks]" in done.stdout
