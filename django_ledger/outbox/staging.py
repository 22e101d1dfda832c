"""An enqueue inside ``transaction.atomic()``: outbox rows in the caller's transaction.

``stage`` writes one row per call in the caller's transaction and registers one
``transaction.on_commit`` per transaction (not per row) that hands the rows it wrote to
the process's courier (``courier.py``), which admits and deletes them in batches, or
(``OUTBOX_DELIVERY: "inline"``, and on SQLite) admits and deletes them itself; what a
crash or a Redis outage leaves behind, the relay delivers (``services/relay.py``).
``defer`` is the ``on_commit`` mode: no row, lossy. What a row carries (a task, a
workflow) is the caller's: the task side (``tasks/staged.py``) stages and reads them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from django.db import transaction
from django.utils import timezone

from . import courier
from .delivery import CHUNK, ROW_COLUMNS, Row, admit_rows, committed_rows, delete_ids
from .models import OutboxEntry
from .target import outbox_target

__all__ = ["RowConflict", "defer", "in_transaction", "stage"]

logger = logging.getLogger("django_ledger.outbox")


class RowConflict(Exception):
    """An id staged already with another payload, or by another deployment (``elsewhere``)."""

    def __init__(self, row_id: str, elsewhere: bool) -> None:
        self.row_id, self.elsewhere = row_id, elsewhere
        where = "another deployment's outbox" if elsewhere else "the outbox, with another payload"
        super().__init__(f"outbox row {row_id!r} is staged already in {where}")


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
    """The one on-commit callback of a transaction: delivers the rows it wrote.

    It holds copies of its rows, so the commit reads nothing back: one ``admit_many``
    per queue and one ``DELETE`` (in autocommit, after the commit), by the courier or,
    ``inline``, by the committing thread. Rows written inside a savepoint may have been
    rolled back with it (Django drops the callbacks of a rolled-back savepoint, not the
    rows a callback holds), and their id written again since with another call: those
    alone are read back as committed, and admitted as read, never from the copies.
    """

    def __init__(self, database: str, background: bool) -> None:
        self.database = database
        self.background = background
        self.rows: list[Row] = []
        #: Ids written inside a savepoint: admitted only if their row exists at commit.
        self.guarded: list[str] = []

    def __call__(self) -> None:
        if self.background:
            courier.send(self.database, self.rows, self.guarded)
            return
        try:
            done, _ = admit_rows(committed_rows(self.database, self.rows, self.guarded))
            delete_ids(self.database, done)
        except Exception:  # the data committed: the relay delivers what is left
            logger.exception(
                "outbox: delivering %d task(s) on commit failed; the relay will deliver them",
                len(self.rows),
            )


def _delivery(database: str, background: bool) -> _Delivery:
    """This transaction's callback: registered on the first row, reused for the rest."""
    connection = transaction.get_connection(database)
    state = getattr(connection, "_ledger_outbox", None)
    # A callback of a rolled-back savepoint (or of an earlier transaction) is gone from
    # run_on_commit: then this transaction needs one of its own.
    if state is None or not any(state in item for item in connection.run_on_commit):
        state = _Delivery(database, background)
        connection._ledger_outbox = state
        transaction.on_commit(state, using=database)
    assert isinstance(state, _Delivery)
    state.background = state.background and background  # inline if any backend says so
    return state


#: The columns ``stage`` writes, in its ``VALUES`` order: a ``Row``'s, then the rest.
_COLUMNS = (*ROW_COLUMNS, "backend", "created_at", "target")


def _upserts(connection: Any) -> bool:
    """Whether ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` works here."""
    return connection.vendor in ("postgresql", "sqlite") and bool(
        connection.features.can_return_rows_from_bulk_insert
    )


#: ``_insert_sql``'s statements by (vendor, rows): the same few texts every call.
_INSERTS: dict[tuple[str, int], str] = {}


def _insert_sql(connection: Any, count: int) -> str:
    """The upsert of ``count`` rows, made once per vendor and count."""
    sql = _INSERTS.get((connection.vendor, count))
    if sql is None:
        quote = connection.ops.quote_name
        columns = ", ".join(quote(name) for name in _COLUMNS)
        values = ", ".join(["(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"] * count)
        sql = (
            f"INSERT INTO {quote(OutboxEntry._meta.db_table)} ({columns}) VALUES {values} "
            f"ON CONFLICT ({quote('id')}) DO NOTHING RETURNING {quote('id')}"
        )
        if count == 1 or count == CHUNK:  # the common texts; others are made per call
            _INSERTS[(connection.vendor, count)] = sql
    return sql


def _insert_new(connection: Any, rows: Sequence[Row], backend: str, target: str) -> set[str]:
    """Insert ``rows`` whose id has no row yet; return the ids inserted. One statement."""
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    inserted: set[str] = set()
    with connection.cursor() as cursor:
        for start in range(0, len(rows), CHUNK):
            part = rows[start : start + CHUNK]
            params = [value for row in part for value in (*row, backend, now, target)]
            cursor.execute(_insert_sql(connection, len(part)), params)
            inserted.update(found for (found,) in cursor.fetchall())
    return inserted


def stage(database: str, backend: str, rows: Sequence[Row], *, background: bool = True) -> None:
    """Write ``rows`` (one per call) as outbox rows of ``backend`` in the current transaction.

    An id already staged with the same payload is left as it is; with another payload
    (or another deployment's) it is ``RowConflict``, and nothing is written. ``background``:
    the courier delivers the rows after the commit (never on SQLite), else the
    committing thread does. Fresh ids (the common case) cost
    one ``INSERT ... ON CONFLICT DO NOTHING`` and nothing else (PostgreSQL, SQLite);
    only ids found staged are read back, to compare their payloads.
    """
    seen: dict[str, Row] = {}
    for row in rows:
        before = seen.setdefault(row.id, row)
        if before.payload != row.payload:
            raise RowConflict(row.id, elsewhere=False)
    rows = list(seen.values())
    connection = transaction.get_connection(database)
    target = outbox_target()
    if _upserts(connection):
        inserted = _insert_new(connection, rows, backend, target)
        if len(inserted) < len(rows):
            try:
                _staged_ids(database, [row for row in rows if row.id not in inserted], target)
            except RowConflict:
                delete_ids(database, sorted(inserted))  # this call's rows: none is kept
                raise
            rows = [row for row in rows if row.id in inserted]
    else:  # no upsert returns rows (MySQL): read the ids first, then insert
        staged = _staged_ids(database, rows, target)
        rows = [row for row in rows if row.id not in staged]
        OutboxEntry.objects.using(database).bulk_create(
            [OutboxEntry(backend=backend, target=target, **row._asdict()) for row in rows],
            batch_size=CHUNK,
        )
    if not rows:
        return
    # SQLite has one writer: the courier's DELETE would wait on the caller's transactions.
    delivery = _delivery(database, background and connection.vendor != "sqlite")
    delivery.rows += rows
    if any(sid is not None for sid in connection.savepoint_ids):
        delivery.guarded += [row.id for row in rows]


def _staged_ids(database: str, rows: list[Row], target: str) -> set[str]:
    """The ids of ``rows`` staged already as they are; ``RowConflict`` for the first staged
    otherwise (with another payload, or by another deployment)."""
    staged: dict[str, tuple[str, str]] = {}
    ids = [row.id for row in rows]
    for start in range(0, len(ids), CHUNK):
        for found, payload, where in (
            OutboxEntry.objects.using(database)
            .filter(pk__in=ids[start : start + CHUNK])
            .values_list("id", "payload", "target")
        ):
            staged[found] = (payload, where)
    for row in rows:
        if row.id in staged and staged[row.id] != (row.payload, target):
            raise RowConflict(row.id, elsewhere=staged[row.id][1] != target)
    return set(staged)


def defer(database: str, queue: str, rows: Sequence[Row]) -> None:
    """The ``on_commit`` mode: admit ``rows`` of ``queue`` after the commit, without an
    outbox row (lossy)."""

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
