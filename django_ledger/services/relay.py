"""The relay: delivers the outbox rows a crash or a Redis outage left behind.

The committer admits its rows on commit; the relay takes whatever is left, oldest first,
in batches, each in a transaction of its own: on PostgreSQL (and any database that has
it) the batch is ``SELECT ... FOR UPDATE SKIP LOCKED``, so relays running at once take
different rows; on SQLite, where a transaction that writes holds the whole database,
batches go one at a time. Admission is idempotent by id, so a row admitted twice (by
the committer and a relay, or by a relay that died before deleting it) answers
``DUPLICATE`` and is deleted: its task is admitted once.

``manage.py ledger_relay`` runs it; ``ledger_worker`` beats it beside repair, in the
repairer's thread (a room of ``core/worker/upkeep.py``), unless ``--no-relay``.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import DatabaseError, connections, transaction

from ..outbox.delivery import ROW_COLUMNS, Row, admit_rows, delete_ids
from ..outbox.effects import prune_effects
from ..outbox.models import OutboxEntry
from ..outbox.options import transaction_options
from ..outbox.tables import outbox_ready
from .worker import _backend_paths

__all__ = [
    "DEFAULT_BATCH",
    "Relay",
    "outbox_databases",
    "relay_batch",
    "tables_ready",
    "worker_relay",
]

logger = logging.getLogger("django_ledger.relay")

#: Rows per batch: one ``admit_many`` (128 per Redis round trip) and one delete each.
DEFAULT_BATCH = 500
#: Seconds between looks at an empty outbox.
DEFAULT_INTERVAL = 1.0
#: Seconds a beat beside repair delivers for at most, before repair gets its turn.
BEAT_BUDGET = 0.25
#: Seconds between prunes of old effects rows, when pruning.
PRUNE_EVERY = 3600.0


def outbox_databases() -> list[str]:
    """The databases whose outbox a relay serves: those of ``TASKS``' outbox backends."""
    found: list[str] = []
    tasks = getattr(settings, "TASKS", {}) or {}
    for params in tasks.values() if isinstance(tasks, dict) else ():
        if not isinstance(params, dict) or params.get("BACKEND") not in _backend_paths():
            continue
        try:
            options = transaction_options(params.get("OPTIONS") or {})
        except (TypeError, ValueError):
            continue  # E065 says so
        if options.mode == "outbox" and options.database not in found:
            found.append(options.database)
    return found


def relay_batch(database: str, batch: int = DEFAULT_BATCH) -> tuple[int, int]:
    """Deliver one batch of the oldest rows; return (delivered, kept for a later try).

    Three statements and one ``admit_many`` per queue: the ``SELECT`` of the batch (rows
    as tuples, no model instances), the admission, the ``DELETE`` of what was delivered.
    """
    manager = OutboxEntry.objects.using(database)
    with transaction.atomic(using=database):
        # Oldest first by the created_at index alone: an index scan that stops at the
        # batch (a tie-break on id would sort the whole backlog for every batch).
        rows = manager.order_by("created_at")
        if connections[database].features.has_select_for_update_skip_locked:
            rows = rows.select_for_update(skip_locked=True)
        else:
            # SQLite: write first, so this transaction holds the database's write lock
            # and two relays' batches go one after the other.
            delete_ids(database, [""])
        taken = [Row(*values) for values in rows.values_list(*ROW_COLUMNS)[:batch]]
        if not taken:
            return 0, 0
        done, kept = admit_rows(taken)
        delete_ids(database, done)
    return len(done), len(kept)


class Relay:
    """The relay of some databases: ``run_once`` drains them, ``beat`` delivers a bounded part.

    ``ledger_worker`` beats it beside repair, in the repairer's thread (a ``Room`` of
    ``core/worker/upkeep.py``); ``ledger_relay --loop`` beats it in a loop of its own
    (``run``), until ``stop`` is set.
    """

    name = "relay"

    def __init__(
        self,
        databases: list[str] | None = None,
        *,
        batch: int = DEFAULT_BATCH,
        interval: float = DEFAULT_INTERVAL,
        prune_days: float | None = None,
    ) -> None:
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        self.databases = outbox_databases() if databases is None else databases
        self.batch = batch
        self.interval = interval
        self.prune_days = prune_days
        self.stop = threading.Event()
        self._pruned_at: float | None = None
        self._failing = False

    def run_once(self) -> int:
        """Deliver every row there is now (batch after batch); return how many."""
        delivered = 0
        for database in self.databases:
            while not self.stop.is_set():
                done, kept = relay_batch(database, self.batch)
                delivered += done
                if done + kept < self.batch or done == 0:
                    break  # drained, or what is left waits for Redis or room
        return delivered

    def prune(self) -> int:
        """Delete effects rows older than ``prune_days``; return how many."""
        if self.prune_days is None:
            return 0
        return sum(prune_effects(database, self.prune_days) for database in self.databases)

    def beat(self) -> float:
        """Deliver batches for up to ``BEAT_BUDGET`` seconds; return the seconds to the next beat.

        ``0`` when a batch came back full (more waits), else ``interval``. A database
        failure is logged once per outage and tried again a beat later.
        """
        started = time.monotonic()
        delivered, more = 0, False
        try:
            for database in self.databases:
                connections[database].close_if_unusable_or_obsolete()
                while True:
                    done, kept = relay_batch(database, self.batch)
                    delivered += done
                    full = done > 0 and done + kept >= self.batch
                    if not full or time.monotonic() - started > BEAT_BUDGET:
                        more = more or full
                        break
            if self.prune_days is not None and (
                self._pruned_at is None or time.monotonic() - self._pruned_at > PRUNE_EVERY
            ):
                self.prune()
                self._pruned_at = time.monotonic()
            if self._failing:
                logger.info("relay: the database answers again")
            self._failing = False
        except DatabaseError as exc:
            if not self._failing:  # once per outage, not once per beat
                logger.warning("relay: the database failed (%s); trying again", exc)
            self._failing = True
            for database in self.databases:
                connections[database].close_if_unusable_or_obsolete()
        if delivered:
            logger.info("relay: delivered %d task(s)", delivered)
        return 0.0 if more else self.interval

    def run(self) -> None:
        """Beat until ``stop`` is set; each wait is on ``stop``, with a time-out."""
        try:
            while not self.stop.is_set():
                self.stop.wait(self.beat())
        finally:
            self.close()

    def close(self) -> None:
        """Close this thread's database connections (the beats opened them here)."""
        for database in self.databases:
            connections[database].close()


def tables_ready(databases: list[str]) -> list[str]:
    """The databases of ``databases`` whose outbox table exists (``migrate`` has run).

    A database without it is warned about once per process (``outbox/tables.py``).
    """
    return [database for database in databases if outbox_ready(database)]


def worker_relay(*, burst: bool) -> Relay | None:
    """The relay of a ``ledger_worker``, to beat beside repair; ``--burst`` drains it now.

    ``None`` when there is no outbox to serve (no outbox backend, or no table yet), or
    with ``burst``: the rows waiting are delivered before the burst, so that it runs them.
    """
    databases = outbox_databases()
    if not databases:
        return None
    ready = tables_ready(databases)
    if not ready:
        return None
    relay = Relay(ready)
    if burst:
        try:
            relay.run_once()
        except DatabaseError as exc:
            logger.warning("relay: the database failed (%s)", exc)
        return None
    return relay
