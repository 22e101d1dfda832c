"""Django's ``TaskResult`` from a task as the ledger holds it (``state.TaskState``)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from ..core.records import State, ms_to_datetime
from .compat import Task, TaskError, TaskResult, TaskResultDoesNotExist, TaskResultStatus
from .exceptions import UnknownTask
from .ledger_task import LedgerTask
from .resolve import resolve_task
from .state import TaskState

__all__ = ["instant", "task_of", "task_result"]


def instant(ms: int | None) -> datetime | None:
    """Return epoch milliseconds as Django shows instants (aware, or naive without USE_TZ)."""
    if not ms:
        return None
    moment = ms_to_datetime(ms)
    return moment if settings.USE_TZ else timezone.make_naive(moment)


def task_of(state: TaskState, alias: str) -> Task[..., Any]:
    """Return the task of ``state`` as it was enqueued: queue, priority and options."""
    if state.payload is None:
        raise TaskResultDoesNotExist(
            f"{state.request_id!r} on queue {state.queue!r} is a ledger record whose payload "
            "is not a task document"
        )
    try:
        declared = resolve_task(state.payload.task)
    except UnknownTask as exc:
        raise TaskResultDoesNotExist(
            f"{state.request_id!r} on queue {state.queue!r} names no task of this project: {exc}"
        ) from exc
    record = state.record
    changes: dict[str, Any] = {}
    if declared.queue_name != state.queue:
        changes["queue_name"] = state.queue
    if declared.backend != alias:
        changes["backend"] = alias
    priority = getattr(record, "priority", 0)
    if declared.priority != priority:
        changes["priority"] = priority
    if record.due_at > record.created_at:
        changes["run_after"] = instant(record.due_at)
    if isinstance(declared, LedgerTask):
        changes.update(state.payload.options)
    return replace(declared, **changes) if changes else declared


def task_result(state: TaskState, task: Task[..., Any], alias: str) -> TaskResult[..., Any]:
    """Build Django's ``TaskResult`` of ``state`` for ``task`` on backend ``alias``."""
    payload = state.payload
    result: TaskResult[..., Any] = TaskResult(
        task=task,
        id=state.request_id,
        status=TaskResultStatus(state.status),
        enqueued_at=instant(state.enqueued_at),
        started_at=instant(state.started_at),
        finished_at=instant(state.finished_at),
        last_attempted_at=instant(state.last_attempted_at),
        args=list(payload.args) if payload else [],
        kwargs=dict(payload.kwargs) if payload else {},
        backend=alias,
        errors=[
            TaskError(
                exception_class_path=str(error.get("exception_class_path", "")),
                traceback=str(error.get("traceback", "")),
            )
            for error in state.errors
        ],
        worker_ids=list(state.worker_ids),
    )
    if state.has_return_value and state.record.state is State.COMPLETED:
        object.__setattr__(result, "_return_value", state.return_value)
    return result
