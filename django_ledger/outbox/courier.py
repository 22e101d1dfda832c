"""The courier: delivers committed outbox rows off the committing thread, in batches.

A transaction's on-commit callback hands its rows to the process's courier and returns:
the caller's commit costs the ``INSERT`` and the ``COMMIT`` alone. One daemon thread per
process takes every parcel waiting and admits them with one ``admit_many`` per queue (128
tasks a round trip) at once; it deletes the admitted rows together, with one ``DELETE``
at most ``DELETE_AFTER`` s later (or at ``DELETE_BATCH`` ids), so the busier the
process, the fewer round trips a row costs. Nothing is promised by the courier that the rows do not
already hold: they are committed, so a process that dies with parcels in hand leaves
them to the relay, which admits each once (admission is idempotent by id).

Used on databases that take concurrent writers (PostgreSQL, MySQL). SQLite has one
writer at a time, and a second connection deleting while the caller writes waits on
it, so there the commit delivers inline (``OUTBOX_DELIVERY``, docs/transactions.md).

- ``flush(timeout)`` waits until every parcel handed over so far is admitted and its
  rows deleted (tests, a graceful shutdown); the process does so at exit, for at most
  ``EXIT_FLUSH`` s.
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

from .delivery import Row, admit_rows, committed_rows, delete_ids

__all__ = ["DELETE_AFTER", "DELETE_BATCH", "EXIT_FLUSH", "IDLE", "MAX_ROWS", "flush", "send"]

logger = logging.getLogger("django_ledger.outbox")

#: Seconds without a parcel after which the courier closes its database connections.
IDLE = 1.0
#: Rows one delivery takes at most (the rest wait for the next, a moment later).
MAX_ROWS = 2048
#: Seconds an admitted row waits at most for its ``DELETE`` (batched with the next ones).
DELETE_AFTER = 0.2
#: Ids one ``DELETE`` takes before it goes at once.
DELETE_BATCH = 512
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
        self.forget()

    def forget(self) -> None:
        """No parcels, no thread, the locks made anew: at the start, and in a forked child."""
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._delivered = threading.Condition(self._lock)
        self._parcels: deque[Parcel] = deque()
        #: Parcels handed over and not yet done with (waiting, in hand, or to delete).
        self._open = 0
        #: Callers waiting in ``flush``.
        self._flushing = 0
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
            self._flushing += 1
            self._arrived.notify()  # the deletes waiting go now
            try:
                while self._open:
                    left = None if deadline is None else deadline - time.monotonic()
                    if left is not None and left <= 0:
                        return False
                    self._delivered.wait(left)
            finally:
                self._flushing -= 1
        return True

    def _take(self, wait: float) -> list[Parcel] | None:
        """The parcels waiting (up to ``MAX_ROWS`` rows), or ``None`` after ``wait`` s.

        A ``flush`` waiting ends the wait too (with no parcels, perhaps).
        """
        with self._lock:
            if not self._parcels and not self._arrived.wait_for(
                lambda: self._parcels or self._flushing, wait
            ):
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

    def _hurried(self) -> bool:
        """Whether someone waits in ``flush``: then the deletes go now."""
        with self._lock:
            return self._flushing > 0

    def _run(self) -> None:
        used: set[str] = set()
        pending = _Deletes()
        while True:
            wait = IDLE if not pending.parcels else max(0.0, pending.due - time.monotonic())
            taken = self._take(wait)
            if taken:
                for database in {parcel.database for parcel in taken}:
                    used.add(database)
                    mine = [parcel for parcel in taken if parcel.database == database]
                    pending.add(database, admit(database, mine))
                pending.parcels += len(taken)
            if pending.parcels and (
                not taken
                or pending.count >= DELETE_BATCH
                or time.monotonic() >= pending.due
                or self._hurried()
            ):
                self._done(pending.delete())
            elif taken is None:  # idle: give the connections back
                for database in used:
                    if database in connections:  # an alias the settings dropped meanwhile
                        connections[database].close()
                used.clear()


class _Deletes:
    """The ids admitted and not yet deleted, deleted together (one ``DELETE`` a database).

    Deleting a row just admitted is a write transaction of its own, as costly as the
    caller's commit; the courier deletes at most ``DELETE_AFTER`` s after the first
    admission waiting, or at ``DELETE_BATCH`` ids, or when a ``flush`` waits. A row left by
    a process killed in between is admitted again by the relay and answers ``DUPLICATE``.
    """

    def __init__(self) -> None:
        self.ids: dict[str, list[str]] = {}
        self.parcels = 0
        self.count = 0
        self.due = 0.0

    def add(self, database: str, ids: list[str]) -> None:
        if not self.parcels and not self.count:
            self.due = time.monotonic() + DELETE_AFTER
        self.ids.setdefault(database, []).extend(ids)
        self.count += len(ids)

    def delete(self) -> int:
        """Delete what waits; return how many parcels it finishes."""
        for database, ids in self.ids.items():
            try:
                delete_ids(database, ids)
            except Exception:  # admitted already: the relay deletes them (DUPLICATE)
                logger.exception(
                    "outbox: deleting %d delivered row(s) failed; the relay will", len(ids)
                )
                connections[database].close()
        parcels, self.parcels, self.count, self.ids = self.parcels, 0, 0, {}
        return parcels


def admit(database: str, parcels: Sequence[Parcel]) -> list[str]:
    """Admit the rows of ``parcels`` (one database's); return the ids to delete.

    Failures are logged and leave the rows to the relay.
    """
    rows = [row for parcel in parcels for row in parcel.rows]
    try:
        # Ids written in a savepoint (that may have rolled back) are read back as committed.
        guarded = [row_id for parcel in parcels for row_id in parcel.guarded]
        done, _ = admit_rows(committed_rows(database, rows, guarded))
        return done
    except Exception:  # the rows are committed: the relay delivers what is left
        logger.exception(
            "outbox: delivering %d task(s) after their commit failed; the relay will deliver them",
            len(rows),
        )
        connections[database].close()  # a broken connection is not reused
        return []


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
