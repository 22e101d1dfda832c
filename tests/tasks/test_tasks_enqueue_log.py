"""Django's own ``task_enqueued`` receiver logs each enqueue at DEBUG, when DEBUG is on.

The backend skips sending ``task_enqueued`` when that receiver is the only one and its
logger is not enabled for DEBUG (``admission.enqueued_heard``): nothing would happen.
These tests hold the rest: the line is there once DEBUG is on, and any other receiver
hears every enqueue, single or bulk.
"""

from __future__ import annotations

import logging
from typing import Any

import django
import pytest

from django_ledger.tasks import enqueue_many
from django_ledger.tasks.admission import enqueued_heard
from django_ledger.tasks.compat import task_enqueued
from tests.support.tasks_app import tasks

pytest_plugins = ["tests.support.tasks_fixtures"]

#: Django's task logger (the django-tasks backport's on Django 5.2).
LOGGER = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"


def test_djangos_debug_line_is_logged_when_debug_is_on(
    task_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        assert enqueued_heard()
        result = tasks.add.enqueue(1, b=2)
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert any(f"id={result.id}" in line and "enqueued" in line for line in lines), lines


def test_another_receiver_hears_every_enqueue(task_namespace: str) -> None:
    heard: list[str] = []

    def receiver(sender: type, task_result: Any, **kwargs: Any) -> None:
        heard.append(task_result.id)

    logging.getLogger(LOGGER).setLevel(logging.INFO)
    try:
        task_enqueued.connect(receiver, weak=False)
        try:
            assert enqueued_heard()
            one = tasks.add.enqueue(1, b=2)
            many = enqueue_many(tasks.add, [((1,), {"b": 2}), ((3,), {"b": 4})])
        finally:
            task_enqueued.disconnect(receiver)
    finally:
        logging.getLogger(LOGGER).setLevel(logging.NOTSET)
    assert heard == [one.id] + [result.id for result in many]
