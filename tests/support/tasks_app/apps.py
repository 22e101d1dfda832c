"""The tests' task app: in worker processes, it records the task signals in Redis."""

from __future__ import annotations

import json
from typing import Any

from django.apps import AppConfig


def signals_key() -> str:
    """The list the worker's signal receivers push to, in the test's namespace."""
    from django_ledger.conf import ledger_settings

    return f"{ledger_settings.namespace}:test-signals"


def _record(name: str) -> Any:
    def receiver(sender: type, task_result: Any, **kwargs: Any) -> None:
        from django_ledger.conf import connection

        event = {
            "signal": name,
            "sender": f"{sender.__module__}.{sender.__qualname__}",
            "id": task_result.id,
            "status": str(task_result.status),
            "attempts": task_result.attempts,
            "errors": len(task_result.errors),
        }
        connection().rpush(signals_key(), json.dumps(event))

    return receiver


class TasksAppConfig(AppConfig):
    name = "tests.support.tasks_app"
    label = "tasks_app"

    def ready(self) -> None:
        from django_ledger.tasks.compat import task_enqueued, task_finished, task_started

        for name, signal in (
            ("task_enqueued", task_enqueued),
            ("task_started", task_started),
            ("task_finished", task_finished),
        ):
            signal.connect(_record(name), weak=False, dispatch_uid=f"tasks_app.{name}")
