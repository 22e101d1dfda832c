"""Fenced effects: a task's database writes applied once, however often the task runs.

::

    @task(takes_context=True)
    def charge(context, order_id):
        with effects(context) as fx:
            if fx.done:                      # an earlier attempt committed the writes
                return fx.result
            Order.objects.filter(pk=order_id).update(paid=True)
            return fx.save({"charged": order_id})

``django_ledger.tasks.effects(context)`` (``tasks/fencing.py``) is the task's face of
``fenced`` here, which opens ``transaction.atomic()`` on the backend's ``DATABASE`` and, first in
that transaction, records the task id with the fence of the attempt's claim by
compare-and-set (one ``INSERT ... ON CONFLICT DO UPDATE SET fence, done ... WHERE fence
<= %s AND NOT done``; ``done`` commits with the block's writes or rolls back with them):
storage-side fencing, the store keeping the highest fence it saw. An attempt
whose fence is lower than the stored one raises ``StaleAttempt`` and its transaction
rolls back (done or not); one with a fence at least the stored one that finds the writes
committed gets ``fx.done`` and the stored result. While one attempt's transaction holds
the row, another's compare-and-set waits for it (PostgreSQL: the row lock; SQLite: the
database's write lock), so two attempts never both run the block's writes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from .models import TaskEffect

__all__ = ["Effects", "StaleAttempt", "fenced", "prune_effects", "tombstone"]


class StaleAttempt(Exception):
    """An attempt whose claim's fence is lower than the one its task's effects hold."""

    def __init__(self, task_id: str, fence: int, stored: int | None) -> None:
        self.task_id, self.fence, self.stored = task_id, fence, stored
        super().__init__(
            f"task {task_id!r}: this attempt's fence {fence} is lower than the fence "
            f"{stored} that holds its effects; a later attempt has the task, so this "
            "attempt's writes are rolled back"
        )


class Effects:
    """One attempt's hold on its task's effects: ``done`` and ``result`` say what is stored.

    ``database`` is the alias of the transaction: write the effects there.
    """

    __slots__ = ("database", "done", "fence", "result", "task_id")

    def __init__(self, task_id: str, fence: int, database: str = "default") -> None:
        self.task_id = task_id
        self.fence = fence
        self.database = database
        self.done = False
        self.result: Any = None

    def save(self, value: Any) -> Any:
        """Keep ``value`` (JSON) as the result a later attempt gets; return it."""
        self.result = value
        return value


@contextmanager
def fenced(task_id: str, fence: int, database: str) -> Iterator[Effects]:
    """Run the block's writes in one transaction on ``database``, fenced by ``fence``.

    Raises ``StaleAttempt`` when a claim with a higher fence wrote first or holds the
    row; the block's writes then roll back.
    """
    fx = Effects(task_id, fence, database)
    with transaction.atomic(using=database):
        # The fence and ``done`` go in first, in the block's transaction: they commit with
        # the block's writes or roll back with them, so no second statement marks it done.
        if not _raise_fence(database, task_id, fence, done=True):
            stored = (
                TaskEffect.objects.using(database)
                .filter(pk=task_id)
                .values_list("fence", "done", "result")
                .first()
            )
            if stored is None or stored[0] > fence or not stored[1]:
                raise StaleAttempt(task_id, fence, None if stored is None else stored[0])
            fx.done = True
            fx.result = json.loads(stored[2]) if stored[2] else None
            yield fx
            return
        yield fx
        if fx.result is not None:  # the row is this transaction's: no fence to compare again
            _keep_result(database, task_id, json.dumps(fx.result))


def tombstone(task_id: str, fence: int, database: str) -> bool:
    """Raise the effects row of ``task_id`` to ``fence``, not done: a cancel's first step.

    Every attempt whose claim's fence is lower is then refused (``StaleAttempt``). An
    attempt's block in flight holds the row, so this waits for it. Return whether the
    effects had committed already (then nothing changes: they stay).
    """
    with transaction.atomic(using=database):
        _raise_fence(database, task_id, fence, done=False)
        return TaskEffect.objects.using(database).filter(pk=task_id, done=True).exists()


def _raise_fence(database: str, task_id: str, fence: int, *, done: bool) -> bool:
    """Set the effects row of ``task_id`` to ``fence`` and ``done`` unless a higher fence
    or committed effects hold it (a new row takes them); whether the row was set.

    Without ``ON CONFLICT`` (MySQL, MariaDB): ``INSERT IGNORE`` takes a new row (and waits
    for another transaction's uncommitted one); else the ``UPDATE``'s ``WHERE`` is the
    compare-and-set, on the row it locks.
    """
    connection = connections[database]
    quote = connection.ops.quote_name
    table = quote(TaskEffect._meta.db_table)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    columns = ", ".join(map(quote, ("task_id", "fence", "done", "result", "updated_at")))
    insert = f"INTO {table} ({columns}) VALUES (%s, %s, %s, '', %s)"
    update = f"{quote('fence')} = %s, {quote('done')} = %s, {quote('updated_at')} = %s"
    guard = f"{table}.{quote('fence')} <= %s AND NOT {table}.{quote('done')}"
    with connection.cursor() as cursor:
        if connection.vendor != "mysql":
            cursor.execute(
                f"INSERT {insert} ON CONFLICT ({quote('task_id')}) DO UPDATE SET {update} "
                f"WHERE {guard}",
                [task_id, fence, done, now, fence, done, now, fence],
            )
            return bool(cursor.rowcount == 1)
        cursor.execute(f"INSERT IGNORE {insert}", [task_id, fence, done, now])
        if cursor.rowcount == 1:
            return True
        cursor.execute(
            f"UPDATE {table} SET {update} WHERE {quote('task_id')} = %s AND {guard}",
            [fence, done, now, task_id, fence],
        )
        return bool(cursor.rowcount == 1)


def _keep_result(database: str, task_id: str, result: str) -> None:
    """Write the block's result on the row this transaction holds."""
    connection = connections[database]
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(TaskEffect._meta.db_table)} SET {quote('result')} = %s "
            f"WHERE {quote('task_id')} = %s",
            [result, task_id],
        )


def prune_effects(database: str, days: float) -> int:
    """Delete effects rows not written for ``days`` days; return how many went."""
    before = timezone.now() - timedelta(days=days)
    deleted, _ = TaskEffect.objects.using(database).filter(updated_at__lt=before).delete()
    return deleted
