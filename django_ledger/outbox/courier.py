"""The courier: delivers committed outbox rows off the committing thread, in batches.

A transaction's on-commit callback hands its rows to the process's courier and returns:
the caller's commit costs the ``INSERT`` and the ``COMMIT`` alone. One daemon thread per
process takes every parcel waiting, admits them with one ``admit_many`` per queue (128
tasks a round trip) and deletes them with one ``DELETE``, so the busier the process, the
fewer round trips a row costs. Nothing is promised by the courier that the rows do not
already hold: they are committed, so a process that dies with parcels in hand leaves
them to the relay, which admits each once (admission is idempotent by id).

Used on databases that take concurrent writers (PostgreSQL, MySQL). SQLite has one
writer at a time, and a second connection deleting while the caller writes waits on
it, so there the commit delivers inline (``OUTBOX_DELIVERY``, docs/transactions.md).

- ``flush(timeout)`` waits until every parcel handed over so far is delivered (tests,
  a graceful shutdown); the process does so at exit, for at most ``EXIT_FLUSH`` s.
- The thread's database connections close after ``IDLE`` s without a parcel, so an idle
  process holds no connection for it.
- A forked child starts with no parcels and no thread (the parent delivers its own).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import NamedTuple

from django.db import connections

from .delivery import Row, admit_rows, delete_ids, existing_ids

__all__ = ["EXIT_FLUSH", "IDLE", "MAX_ROWS", "flush", "send"]

logger = logging.getLogger("django_ledger.outbox")

#: Seconds without a parcel after which the courier closes its database connections.
IDLE = 1.0
#: Rows one delivery takes at most (the rest wait for the next, a moment later).
MAX_ROWS = 2048
#: Seconds the process waits at exit for the courier's parcels (the relay has the rest).
EXIT_FLUSH = 5.0


class Parcel(NamedTuple):
    """One transaction's rows: ``guarded`` ids were written in a savepoint."""

    database: str
    rows: Sequence[Row]
    guarded: Sequence[str]


class Courier:
    """The process's courier thread, started by the first parcel."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._delivered = threading.Condition(self._lock)
        self._parcels: deque[Parcel] = deque()
        #: Parcels handed over and not yet delivered (waiting or in hand).
        self._open = 0
        self._thread: threading.Thread | None = None

    def send(self, parcel: Parcel) -> None:
        with self._lock:
            self._parcels.append(parcel)
            self._open += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="django-ledger-courier", daemon=True
                )
                self._thread.start()
            self._arrived.notify()

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every parcel handed over is delivered; ``False`` if time ran out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._open:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._delivered.wait(left)
        return True

    def forget(self) -> None:
        """In a forked child: no parcels, no thread (the locks are made anew)."""
        self._reset()

    def _take(self) -> list[Parcel] | None:
        """The parcels waiting (up to ``MAX_ROWS`` rows), or ``None`` after ``IDLE`` s."""
        with self._lock:
            if not self._parcels and not self._arrived.wait_for(lambda: self._parcels, IDLE):
                return None
            taken: list[Parcel] = []
            rows = 0
            while self._parcels and (not taken or rows + len(self._parcels[0].rows) <= MAX_ROWS):
                parcel = self._parcels.popleft()
                taken.append(parcel)
                rows += len(parcel.rows)
            return taken

    def _done(self, count: int) -> None:
        with self._lock:
            self._open -= count
            self._delivered.notify_all()

    def _run(self) -> None:
        used: set[str] = set()
        while True:
            taken = self._take()
            if taken is None:  # idle: give the connections back
                for database in used:
                    connections[database].close()
                used.clear()
                continue
            try:
                for database in {parcel.database for parcel in taken}:
                    used.add(database)
                    deliver(database, [parcel for parcel in taken if parcel.database == database])
            finally:
                self._done(len(taken))


def deliver(database: str, parcels: Sequence[Parcel]) -> None:
    """Admit and delete the rows of ``parcels`` (one database's); failures are logged."""
    rows = [row for parcel in parcels for row in parcel.rows]
    try:
        guarded = [row_id for parcel in parcels for row_id in parcel.guarded]
        if guarded:  # written in a savepoint that may have rolled back
            gone = set(guarded) - existing_ids(database, guarded)
            rows = [row for row in rows if row.id not in gone]
        done, _ = admit_rows(rows)
        delete_ids(database, done)
    except Exception:  # the rows are committed: the relay delivers what is left
        logger.exception(
            "outbox: delivering %d task(s) after their commit failed; the relay will deliver them",
            len(rows),
        )
        connections[database].close()  # a broken connection is not reused


_courier = Courier()
os.register_at_fork(after_in_child=_courier.forget)
atexit.register(lambda: _courier.flush(EXIT_FLUSH))


def send(database: str, rows: Sequence[Row], guarded: Sequence[str] = ()) -> None:
    """Hand one transaction's committed rows to the courier (returns at once)."""
    _courier.send(Parcel(database, rows, guarded))


def flush(timeout: float | None = None) -> bool:
    """Wait until the rows handed to this process's courier are delivered.

    Return ``False`` if ``timeout`` seconds passed first. The rows are committed whatever
    this answers: what the courier does not deliver, the relay does.
    """
    return _courier.flush(timeout)
