"""E093: a schedule whose ``QUEUE`` its task is not declared for is refused by ``check``.

A fire is admitted with ``task.using(queue_name=QUEUE)``, and a worker runs only tasks
declared for its queue (``queue_name``, or ``queues=[...]``): such a schedule would fail
every fire unrun (``TaskRefused``), so the system check says so first.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from django_ledger.checks.schedules import check_schedules

NOOP = "tests.support.tasks_app.tasks.noop"  # queue_name "default"
ON_EMAILS = "tests.support.tasks_app.tasks.on_emails"  # queue_name "emails"
BOTH = "tests.support.tasks_app.tenancy.both"  # "emails", and declared for "reports" too


def messages(settings: Any, schedule: dict[str, Any]) -> list[Any]:
    queues = {**settings.LEDGER["QUEUES"], "emails": {}, "reports": {}}
    settings.LEDGER = {**settings.LEDGER, "QUEUES": queues, "SCHEDULES": {"job": schedule}}
    return list(check_schedules())


def test_a_queue_the_task_is_not_declared_for_is_e093(settings: Any) -> None:
    found = messages(settings, {"TASK": NOOP, "EVERY": 60, "QUEUE": "emails"})

    assert [m.id for m in found] == ["django_ledger.E093"]
    message = found[0]
    assert "'emails'" in message.msg and "'default'" in message.msg
    assert "TaskRefused" in message.msg
    assert message.hint and "queue_name='emails'" in message.hint
    assert "QUEUE" in str(message.obj)


@pytest.mark.parametrize(
    ("task", "queue"),
    [
        (NOOP, None),  # the task's own queue
        (NOOP, "default"),
        (ON_EMAILS, "emails"),
        (BOTH, "emails"),
        (BOTH, "reports"),  # declared with queues=[...]
    ],
)
def test_a_declared_queue_passes(settings: Any, task: str, queue: str | None) -> None:
    schedule: dict[str, Any] = {"TASK": task, "EVERY": 60, "ARGS": [1]}
    if queue is not None:
        schedule["QUEUE"] = queue

    assert [m.id for m in messages(settings, schedule)] == []


def test_a_task_declared_elsewhere_fails_on_a_queue_it_lacks(settings: Any) -> None:
    found = messages(settings, {"TASK": ON_EMAILS, "EVERY": 60, "ARGS": [1], "QUEUE": "reports"})

    assert [m.id for m in found] == ["django_ledger.E093"]


def test_manage_py_check_stops_on_it(settings: Any) -> None:
    messages(settings, {"TASK": NOOP, "EVERY": 60, "QUEUE": "emails"})

    with pytest.raises(SystemCheckError, match="E093"):
        call_command("check")


def test_a_raw_handler_queue_is_not_held_to_task_queues(settings: Any) -> None:
    queues = {**settings.LEDGER["QUEUES"], "raw": {"HANDLER": "tests.support.bench_handlers.noop"}}
    settings.LEDGER = {
        **settings.LEDGER,
        "QUEUES": queues,
        "SCHEDULES": {
            "job": {"TASK": "tests.support.bench_handlers.noop", "EVERY": 60, "QUEUE": "raw"}
        },
    }

    assert [m.id for m in check_schedules()] == []
