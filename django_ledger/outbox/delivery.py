"""Admitting outbox rows: the committer's step on commit and the relay's, the same one.

Admission is idempotent by id, so a row admitted twice (by the committer and a relay,
or by a relay that died before deleting it) answers ``DUPLICATE``: it is delivered.
The statements are plain SQL on the connection as it is (autocommit after a commit,
the relay's transaction in a batch): one ``DELETE ... WHERE id IN`` per 500 ids, no
ORM collector and no transaction of its own around it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import NamedTuple

from django.core.exceptions import ImproperlyConfigured
from django.db import connections

from ..core.errors import LedgerError, LedgerUnavailable
from ..core.results import AdmissionStatus
from ..queues import queues
from .models import OutboxEntry, OutboxKind
from .workflow_rows import admit_workflow_rows

__all__ = [
    "CHUNK",
    "ROW_COLUMNS",
    "Delivered",
    "Row",
    "admit_rows",
    "committed_rows",
    "delete_ids",
    "deliver_rows",
    "read_rows",
]

logger = logging.getLogger("django_ledger.outbox")

#: Ids per ``IN (...)`` statement: under SQLite's 999 bound variables.
CHUNK = 500


class Row(NamedTuple):
    """An outbox row as a delivery holds it (the committer's copy, or a relay's read)."""

    id: str
    queue: str
    payload: str
    delay_ms: int
    run_after_ms: int | None
    priority: int
    #: What the row carries (``OutboxKind``): a task, a workflow.
    kind: str
    #: The enqueue's W3C trace context, "" for none.
    traceparent: str = ""


#: The columns a delivery reads and a staging writes first: ``Row``'s fields, in order.
ROW_COLUMNS: tuple[str, ...] = Row._fields


class Delivered(NamedTuple):
    """What admitting some rows came to: the ids done with, the ids kept, and why kept."""

    done: list[str]
    kept: list[str]
    #: Queues whose rows were kept (full, or refused by this process's settings): the
    #: relay passes over their other rows until its next walk.
    stalled: set[str]
    #: Whether Redis was away: nothing else can be delivered now.
    away: bool


def admit_rows(rows: Iterable[Row | OutboxEntry]) -> tuple[list[str], list[str]]:
    """Admit ``rows``; return the ids done with and the ids to keep for a later try.

    Done: admitted, duplicate (admitted before), or refused for good (another call under
    the id, a refused payload, a delay or a priority the ledger refuses: logged as
    errors). Kept: Redis away, a full queue, a queue not configured here. One
    ``admit_many`` per (queue, delay, priority, traceparent) group.
    """
    delivered = deliver_rows(rows)
    return delivered.done, delivered.kept


def deliver_rows(rows: Iterable[Row | OutboxEntry]) -> Delivered:
    """``admit_rows``, saying also which queues kept rows and whether Redis was away."""
    groups: dict[tuple[str, int, int | None, int, str], list[Row | OutboxEntry]] = {}
    done: list[str] = []
    kept: list[str] = []
    stalled: set[str] = set()
    away = False
    flows: list[Row | OutboxEntry] = []
    for row in rows:
        if row.kind == OutboxKind.TASK:
            key = (row.queue, row.delay_ms, row.run_after_ms, row.priority, row.traceparent or "")
            groups.setdefault(key, []).append(row)
        elif row.kind == OutboxKind.WORKFLOW:
            flows.append(row)
        else:  # written by a later version: left for a relay that knows its kind
            logger.error(
                "outbox: row %r has kind %r, which is not delivered here", row.id, row.kind
            )
            kept.append(row.id)
            stalled.add(row.queue)
    if flows:
        admitted, held = admit_workflow_rows(flows)
        done += admitted
        kept += held
        waiting = set(held)
        stalled.update(row.queue for row in flows if row.id in waiting)
    for (queue, delay_ms, run_after_ms, priority, trace), group in groups.items():
        try:
            ledger = queues.get(queue).ledger
            if run_after_ms is not None:
                delay_ms = max(0, run_after_ms - ledger.server_time_ms())
            answers = ledger.admit_many(
                [(row.id, row.payload) for row in group],
                timedelta(milliseconds=delay_ms),
                trace or None,
                priority=priority,
            )
        except (LedgerError, ImproperlyConfigured) as exc:
            logger.warning("outbox: %d task(s) of queue %r kept: %s", len(group), queue, exc)
            kept += [row.id for row in group]
            if isinstance(exc, LedgerUnavailable):
                away = True
            else:
                stalled.add(queue)
            continue
        except (ValueError, TypeError) as exc:  # a row written by hand: never admissible
            logger.error(
                "outbox: %d task(s) of queue %r refused (%s); their rows are dropped: %s",
                len(group),
                queue,
                exc,
                ", ".join(repr(row.id) for row in group[:5]),
            )
            done += [row.id for row in group]
            continue
        for answer in answers:
            status = answer.status
            if status is AdmissionStatus.ADMITTED or status is AdmissionStatus.DUPLICATE:
                done.append(answer.request_id)
            elif status is AdmissionStatus.FULL:
                kept.append(answer.request_id)
                stalled.add(queue)
            else:
                logger.error(
                    "outbox: task %r refused by queue %r (%s: %s); its row is dropped",
                    answer.request_id,
                    queue,
                    status.name,
                    answer.reason,
                )
                done.append(answer.request_id)
    return Delivered(done, kept, stalled, away)


def delete_ids(database: str, ids: Sequence[str]) -> None:
    """Delete the outbox rows of ``ids``: one statement (per ``CHUNK`` ids but on PostgreSQL)."""
    if not ids:
        return
    connection = connections[database]
    quote = connection.ops.quote_name
    table, key = quote(OutboxEntry._meta.db_table), quote("id")
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":  # one array, however many ids
            cursor.execute(f"DELETE FROM {table} WHERE {key} = ANY(%s)", [list(ids)])
            return
        for start in range(0, len(ids), CHUNK):
            part = list(ids[start : start + CHUNK])
            marks = ", ".join(["%s"] * len(part))
            cursor.execute(f"DELETE FROM {table} WHERE {key} IN ({marks})", part)


def read_rows(database: str, ids: Sequence[str]) -> list[Row]:
    """The outbox rows of ``ids`` as this connection sees them (one ``SELECT`` per 500 ids)."""
    found: list[Row] = []
    manager = OutboxEntry.objects.using(database)
    for start in range(0, len(ids), CHUNK):
        found += [
            Row(*values)
            for values in manager.filter(pk__in=ids[start : start + CHUNK])
            .order_by()
            .values_list(*ROW_COLUMNS)
        ]
    return found


def committed_rows(database: str, rows: Sequence[Row], guarded: Sequence[str]) -> list[Row]:
    """What a commit admits: ``rows``, its own copies, but for the ids in ``guarded``.

    Those were written inside a savepoint, which may have rolled back, and the same id may
    have been written again since with another call: they are read back as committed (a
    rolled-back one is gone), never taken from the copies.
    """
    if not guarded:
        return list(rows)
    again = set(guarded)
    return [row for row in rows if row.id not in again] + read_rows(database, sorted(again))
