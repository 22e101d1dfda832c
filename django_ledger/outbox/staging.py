"""An enqueue inside ``transaction.atomic()``: outbox rows in the caller's transaction.

``stage`` writes one row per call in the caller's transaction and registers one
``transaction.on_commit`` per transaction (not per row) that admits the rows it wrote
and deletes them; what a crash or a Redis outage leaves behind, the relay delivers
(``services/relay.py``). ``defer`` is the ``on_commit`` mode: no row, lossy.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from django.db import transaction

from ..core.jobs import BadPayload, decode_task
from ..tasks.compat import TaskResult
from ..tasks.exceptions import TaskIdConflict, UnknownTask
from ..tasks.ledger_task import LedgerTask
from ..tasks.resolve import resolve_task
from ..tasks.results import new_result, usable_options
from .delivery import CHUNK, admit_rows, deliver_ids
from .models import OutboxEntry

__all__ = ["defer", "in_transaction", "stage", "staged_result"]

logger = logging.getLogger("django_ledger.outbox")


def in_transaction(database: str) -> bool:
    """Whether this thread is inside ``transaction.atomic()`` on ``database``.

    The blocks ``TestCase`` opens around each test (``pytest.mark.django_db`` too) do not
    count, as for Django's ``atomic(durable=True)``: an enqueue under them alone admits at
    once, as the same code does in production, in autocommit.
    """
    connection = transaction.get_connection(database)
    if not connection.in_atomic_block:
        return False
    return any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks)


class _Delivery:
    """The one on-commit callback of a transaction: admits the rows it wrote."""

    def __init__(self, database: str) -> None:
        self.database = database
        self.ids: list[str] = []

    def __call__(self) -> None:
        try:
            deliver_ids(self.database, self.ids)
        except Exception:  # the data committed: the relay delivers what is left
            logger.exception(
                "outbox: delivering %d task(s) on commit failed; the relay will deliver them",
                len(self.ids),
            )


def _delivery(database: str) -> _Delivery:
    """This transaction's callback: registered on the first row, reused for the rest."""
    connection = transaction.get_connection(database)
    state = getattr(connection, "_ledger_outbox", None)
    # A callback of a rolled-back savepoint (or of an earlier transaction) is gone from
    # run_on_commit: then this transaction needs one of its own.
    if state is None or not any(state in item for item in connection.run_on_commit):
        state = _Delivery(database)
        connection._ledger_outbox = state
        transaction.on_commit(state, using=database)
    assert isinstance(state, _Delivery)
    return state


def stage(
    database: str,
    backend: str,
    queue: str,
    requests: Sequence[tuple[str, str]],
    *,
    delay_ms: int,
    run_after_ms: int | None,
    priority: int,
) -> None:
    """Write ``requests`` (id, payload) as outbox rows in the current transaction.

    An id already staged with the same payload is left as it is; with another payload
    it is ``TaskIdConflict``, and nothing is written.
    """
    manager = OutboxEntry.objects.using(database)
    ids = [request_id for request_id, _ in requests]
    staged: dict[str, str] = {}
    for start in range(0, len(ids), CHUNK):
        staged.update(
            manager.filter(pk__in=ids[start : start + CHUNK]).values_list("id", "payload")
        )
    rows: list[OutboxEntry] = []
    seen: dict[str, str] = {}
    for request_id, payload in requests:
        before = staged.get(request_id, seen.get(request_id))
        if before is not None:
            if before != payload:
                raise TaskIdConflict(request_id, queue)
            continue
        seen[request_id] = payload
        rows.append(
            OutboxEntry(
                id=request_id,
                backend=backend,
                queue=queue,
                payload=payload,
                delay_ms=delay_ms,
                run_after_ms=run_after_ms,
                priority=priority,
            )
        )
    if not rows:
        return
    delivery = _delivery(database)
    manager.bulk_create(rows, batch_size=CHUNK)
    delivery.ids += [row.id for row in rows]


def defer(
    database: str,
    queue: str,
    requests: Sequence[tuple[str, str]],
    *,
    delay_ms: int,
    run_after_ms: int | None,
    priority: int,
) -> None:
    """The ``on_commit`` mode: admit ``requests`` after the commit, without a row (lossy)."""
    rows = [
        OutboxEntry(
            id=request_id,
            queue=queue,
            payload=payload,
            delay_ms=delay_ms,
            run_after_ms=run_after_ms,
            priority=priority,
        )
        for request_id, payload in requests
    ]

    def admit() -> None:
        try:
            _, kept = admit_rows(rows)
        except Exception:
            kept = [row.id for row in rows]
            logger.exception("outbox: admitting on commit failed")
        if kept:
            logger.error(
                "on_commit: %d task(s) of queue %r were not admitted and are lost "
                "(TRANSACTIONS 'outbox' would keep them): %s",
                len(kept),
                queue,
                ", ".join(kept[:5]),
            )

    transaction.on_commit(admit, using=database)


def staged_result(database: str, alias: str, result_id: str) -> TaskResult[..., Any] | None:
    """The READY result of task ``result_id`` if it waits in the outbox, else ``None``."""
    row = OutboxEntry.objects.using(database).filter(pk=result_id).first()
    if row is None:
        return None
    try:
        payload = decode_task(row.payload)
        declared = resolve_task(payload.task)
    except (BadPayload, UnknownTask):
        return None
    changes: dict[str, Any] = {}
    if declared.queue_name != row.queue:
        changes["queue_name"] = row.queue
    if declared.backend != alias:
        changes["backend"] = alias
    if declared.priority != row.priority:
        changes["priority"] = row.priority
    if isinstance(declared, LedgerTask):
        changes.update(usable_options(payload.options))
    task = replace(declared, **changes) if changes else declared
    return new_result(task, row.id, list(payload.args), dict(payload.kwargs), alias)
