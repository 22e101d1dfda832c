"""A backend's enqueues inside ``transaction.atomic()``, as outbox rows, and their results.

``stage_calls`` writes a backend's calls (tasks, or a whole workflow) to the outbox
(``TRANSACTIONS: "outbox"``) or admits them after the commit (``"on_commit"``), through
``outbox/staging.py``; ``readable_staged_result`` answers ``get_result`` for a task whose
row waits in the outbox.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.core.exceptions import SynchronousOnlyOperation
from django.db import DatabaseError
from django.utils import timezone

from ..core.jobs import BadPayload, decode_task
from ..core.timing import instant_ms
from ..outbox.delivery import Row
from ..outbox.models import OutboxEntry, OutboxKind
from ..outbox.options import TransactionOptions
from ..outbox.staging import RowConflict, defer, stage
from ..outbox.tables import outbox_ready
from ..outbox.target import LEGACY, outbox_target
from .compat import Task, TaskResult
from .exceptions import TaskIdConflict, UnknownTask
from .resolve import resolve_task
from .results import enqueued_as, new_result, usable_options

__all__ = ["readable_staged_result", "stage_calls", "stage_task", "staged_result"]


def stage_calls(
    options: TransactionOptions,
    alias: str,
    queue: str,
    requests: Sequence[tuple[str, str]],
    *,
    delay_ms: int = 0,
    run_after_ms: int | None = None,
    priority: int = 0,
    kind: str = OutboxKind.TASK,
    traceparent: str | None = None,
) -> None:
    """Join ``requests`` (id, payload) to the caller's transaction, as backend ``alias``.

    ``TaskIdConflict`` when an id waits in the outbox for another call, or for another
    deployment; nothing is written then.
    """
    rows = [
        Row(request_id, queue, payload, delay_ms, run_after_ms, priority, kind, traceparent or "")
        for request_id, payload in requests
    ]
    if options.mode != "outbox":
        defer(options.database, queue, rows)
        return
    try:
        stage(options.database, alias, rows, background=options.delivery == "background")
    except RowConflict as exc:
        reason = "elsewhere" if exc.elsewhere else None
        raise TaskIdConflict(exc.row_id, queue, reason) from None


def stage_task(
    options: TransactionOptions,
    alias: str,
    task: Task[..., Any],
    queue: str,
    requests: Sequence[tuple[str, str]],
    traceparent: str | None,
) -> None:
    """``stage_calls`` for calls of ``task``, with its ``run_after`` and priority."""
    run_after: object = task.run_after
    delay_ms, run_after_ms = 0, None
    if isinstance(run_after, timedelta):
        delay_ms = max(0, int(run_after.total_seconds() * 1000))
    elif isinstance(run_after, datetime):
        if timezone.is_naive(run_after):  # only without USE_TZ: validate_task says so
            run_after = timezone.make_aware(run_after)
        run_after_ms = instant_ms(run_after, "run_after")
    stage_calls(
        options,
        alias,
        queue,
        requests,
        delay_ms=delay_ms,
        run_after_ms=run_after_ms,
        priority=task.priority,
        traceparent=traceparent,
    )


def readable_staged_result(
    database: str, alias: str, result_id: str
) -> tuple[bool, TaskResult[..., Any] | None]:
    """Whether the outbox could be read, and ``staged_result`` if so.

    Not read: no table, or a database that may not or cannot be read now (a synchronous
    call inside an event loop, a ``SimpleTestCase``, the database down); then the caller's
    other answer (Redis's) stands.
    """
    try:
        if not outbox_ready(database):
            return False, None
        return True, staged_result(database, alias, result_id)
    except (DatabaseError, SynchronousOnlyOperation):
        return False, None
    except AssertionError as exc:
        from django.test import testcases  # only tests forbid the database so

        forbidden = getattr(testcases, "DatabaseOperationForbidden", None)
        if forbidden is not None and isinstance(exc, forbidden):  # a SimpleTestCase
            return False, None
        raise


def staged_result(database: str, alias: str, result_id: str) -> TaskResult[..., Any] | None:
    """The READY result of task ``result_id`` if it waits in the outbox, else ``None``."""
    # Another deployment's row (another Redis or namespace) is not this one's task.
    row = (
        OutboxEntry.objects.using(database)
        .filter(pk=result_id, kind=OutboxKind.TASK, target__in=(outbox_target(), LEGACY))
        .first()
    )
    if row is None:
        return None
    try:
        payload = decode_task(row.payload)
        declared = resolve_task(payload.task)
    except (BadPayload, UnknownTask):
        return None
    task = enqueued_as(
        declared, alias, row.queue, usable_options(payload.options), priority=row.priority
    )
    return new_result(task, row.id, list(payload.args), dict(payload.kwargs), alias)
