"""Every bad setting of ``LEDGER['SCHEDULES']`` gets its system check id (E070 to E079, E090 to E092)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from django_ledger.checks.schedules import check_schedules
from django_ledger.checks.settings import check_settings
from django_ledger.core.schedule import Cron, Every, Misfire
from django_ledger.services import scheduler

TASK = "tests.support.tasks_app.tasks.noop"
ADD = "tests.support.tasks_app.tasks.add"
GOOD = {"TASK": TASK, "CRON": "0 3 * * *", "TIMEZONE": "Europe/Paris"}


def ids_for(settings: Any, schedules: Any) -> list[str]:
    settings.LEDGER = {**settings.LEDGER, "SCHEDULES": schedules}
    return [message.id for message in check_schedules()]


def test_good_schedules_pass_every_check(settings: Any) -> None:
    schedules = {
        "nightly": GOOD,
        "heartbeat": {
            "TASK": "tests.support.tasks_app.tasks.on_emails",
            "ARGS": [1],
            "EVERY": timedelta(minutes=5),
            "QUEUE": "emails",
        },
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


def test_a_task_module_that_raises_at_import_is_reported_not_raised(
    settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "schedule_broken_tasks.py").write_text(
        "raise RuntimeError('the tasks module needs a database at import')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "schedule_broken_tasks", raising=False)
    schedules = {"nightly": {**GOOD, "TASK": "schedule_broken_tasks.nightly"}}
    settings.LEDGER = {**settings.LEDGER, "SCHEDULES": schedules}

    found = checks.run_checks(tags=["django_ledger"])

    [message] = [m for m in found if m.id.startswith("django_ledger.E07")]
    assert message.id == "django_ledger.E073"
    assert "RuntimeError: the tasks module needs a database at import" in message.msg
    assert message.obj == "LEDGER['SCHEDULES']['nightly']['TASK']"
    with pytest.raises(SystemCheckError, match=r"django_ledger\.E073"):
        call_command("check", "--tag", "django_ledger", stdout=StringIO(), stderr=StringIO())
    with pytest.raises(ImproperlyConfigured, match="E073"):
        scheduler.schedules()


def test_a_task_queue_typo_with_schedules_is_e060_not_a_crash(settings: Any) -> None:
    settings.LEDGER = {**settings.LEDGER, "SCHEDULES": {"nightly": GOOD}}
    tasks = {"default": {"BACKEND": "django_ledger.tasks.LedgerBackend", "QUEUES": ["defualt"]}}
    # The test module imported the task already: a fresh process imports it in the check.
    # Every check, as manage.py check runs them: E060 comes from the backend's own check()
    # (through Django's task check where it is registered).
    with override_settings(TASKS=tasks), _task_module_unimported():
        found = {m.id: m for m in checks.run_checks()}

    assert "django_ledger.E060" in found and "'defualt'" in found["django_ledger.E060"].msg
    assert "not valid" in found["django_ledger.E073"].msg


@contextmanager
def _task_module_unimported() -> Iterator[None]:
    name = TASK.rpartition(".")[0]
    module = sys.modules.pop(name, None)
    try:
        yield
    finally:
        sys.modules.pop(name, None)
        if module is not None:
            sys.modules[name] = module


@pytest.mark.parametrize(
    ("entry", "expected", "words"),
    [
        ({"TASK": TASK, "EVERY": timedelta(days=3650000)}, "E076", "at most"),
        ({"TASK": TASK, "EVERY": 10**12}, "E076", "at most"),
        ({**GOOD, "TASK": "os.system"}, "E090", "not a task"),
        ({**GOOD, "TASK": "tests.support.tasks_app.tasks.import_string"}, "E090", "not a task"),
        ({**GOOD, "TASK": "django_ledger.services.scheduler"}, "E090", "not a task"),
        ({**GOOD, "TASK": ADD, "ARGS": [1]}, "E091", "missing a required argument: 'b'"),
        ({**GOOD, "TASK": ADD, "ARGS": [1, 2, 3]}, "E091", "too many positional"),
        ({**GOOD, "TASK": ADD, "ARGS": [1, 2], "KWARGS": {"c": 2}}, "E091", "'c'"),
        ({**GOOD, "QUEUE": "small", "ARGS": ["x" * 300]}, "E092", "MAX_PAYLOAD_BYTES (256)"),
    ],
)
def test_a_schedule_that_could_never_run_is_refused_by_the_checks(
    settings: Any, entry: dict[str, Any], expected: str, words: str
) -> None:
    queues = {**settings.LEDGER["QUEUES"], "small": {"MAX_PAYLOAD_BYTES": 256}}
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues, "SCHEDULES": {"s": entry}}

    [message] = check_schedules()

    assert message.id == f"django_ledger.{expected}"
    assert words in message.msg and message.hint
    assert message.obj.startswith("LEDGER['SCHEDULES']['s']")
    with pytest.raises(ImproperlyConfigured, match=expected):
        scheduler.schedules()


def test_schedules_that_fit_their_task_pass(settings: Any) -> None:
    queues = {**settings.LEDGER["QUEUES"], "default": {"MAX_PAYLOAD_BYTES": 256}}
    schedules = {
        "add": {**GOOD, "TASK": ADD, "ARGS": [1], "KWARGS": {"b": 2}},
        "small": {**GOOD, "ARGS": ["x" * 100]},
        "century": {"TASK": TASK, "EVERY": timedelta(days=36_500)},
    }
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues, "SCHEDULES": schedules}

    assert check_schedules() == []
    assert scheduler.schedules()["century"].every == 36_500 * 86_400


def test_a_raw_queue_takes_any_callable_its_handler_reads(settings: Any) -> None:
    queues = {
        **settings.LEDGER["QUEUES"],
        "raw": {"HANDLER": "tests.support.worker_handlers.record"},
    }
    schedules = {"raw": {**GOOD, "QUEUE": "raw", "TASK": "os.path.join", "ARGS": [1]}}
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues, "SCHEDULES": schedules}

    assert check_schedules() == []
    schedules["raw"]["TASK"] = "os.sep"
    [message] = check_schedules()
    assert message.id == "django_ledger.E090" and "not callable" in message.msg
