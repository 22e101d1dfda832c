"""The relay: delivers the outbox rows a crash or a Redis outage left behind.

The committer admits its rows on commit; the relay takes whatever is left, oldest first,
in batches, each in a transaction of its own: on PostgreSQL (and any database that has
it) the batch is ``SELECT ... FOR UPDATE SKIP LOCKED``, so relays running at once take
different rows; on SQLite, where a transaction that writes holds the whole database,
batches go one at a time. Admission is idempotent by id, so a row admitted twice (by
the committer and a relay, or by a relay that died before deleting it) answers
``DUPLICATE`` and is deleted: its task is admitted once.

``manage.py ledger_relay`` runs it; ``ledger_worker`` runs it in a thread beside its
work unless ``--no-relay``.
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import DatabaseError, connections, transaction

from ..outbox.delivery import CHUNK, admit_rows
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
    "start_worker_relay",
    "tables_ready",
]

logger = logging.getLogger("django_ledger.relay")

#: Rows per batch: one ``admit_many`` (128 per Redis round trip) and one delete each.
DEFAULT_BATCH = 500
#: Seconds between looks at an empty outbox.
DEFAULT_INTERVAL = 1.0
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
    """Deliver one batch of the oldest rows; return (delivered, kept for a later try)."""
    manager = OutboxEntry.objects.using(database)
    with transaction.atomic(using=database):
        rows = manager.order_by("created_at", "id")
        if connections[database].features.has_select_for_update_skip_locked:
            rows = rows.select_for_update(skip_locked=True)
        else:
            # SQLite: write first, so this transaction holds the database's write lock
            # and two relays' batches go one after the other.
            manager.filter(pk="").delete()
        taken = list(rows[:batch])
        if not taken:
            return 0, 0
        done, kept = admit_rows(taken)
        for start in range(0, len(done), CHUNK):
            manager.filter(pk__in=done[start : start + CHUNK]).delete()
    return len(done), len(kept)


class Relay:
    """The relay of some databases: ``run_once`` drains them, ``run`` loops until stopped."""

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
        self._thread: threading.Thread | None = None

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

    def run(self) -> None:
        """Deliver and prune until ``stop`` is set; each wait is on ``stop``, with a time-out."""
        pruned_at: float | None = None
        failing = False
        try:
            while not self.stop.is_set():
                delivered = 0
                try:
                    delivered = self.run_once()
                    if self.prune_days is not None and (
                        pruned_at is None or time.monotonic() - pruned_at > PRUNE_EVERY
                    ):
                        self.prune()
                        pruned_at = time.monotonic()
                    if failing:
                        logger.info("relay: the database answers again")
                    failing = False
                except DatabaseError as exc:
                    if not failing:  # once per outage, not once per loop
                        logger.warning("relay: the database failed (%s); trying again", exc)
                    failing = True
                    for database in self.databases:
                        connections[database].close_if_unusable_or_obsolete()
                if delivered:
                    logger.info("relay: delivered %d task(s)", delivered)
                self.stop.wait(0 if delivered >= self.batch else self.interval)
        finally:
            connections.close_all()  # this thread's own connections

    def start(self) -> threading.Thread:
        """Run ``run`` in a daemon thread; ``close`` stops it."""
        self._thread = threading.Thread(target=self.run, name="ledger-relay", daemon=True)
        self._thread.start()
        return self._thread

    def close(self, timeout: float = 10.0) -> None:
        """Stop the loop and wait for its thread."""
        self.stop.set()
        if self._thread is not None:
            self._thread.join(timeout)


def tables_ready(databases: list[str]) -> list[str]:
    """The databases of ``databases`` whose outbox table exists (``migrate`` has run).

    A database without it is warned about once per process (``outbox/tables.py``).
    """
    return [database for database in databases if outbox_ready(database)]


def start_worker_relay(*, burst: bool) -> Relay | None:
    """The relay of a ``ledger_worker``: started in a thread, or run once with ``--burst``.

    ``None`` when there is no outbox to serve (no outbox backend, or no table yet).
    """
    databases = outbox_databases()
    if not databases:
        return None
    ready = tables_ready(databases)
    if not ready:
        return None
    relay = Relay(ready)
    if burst:  # deliver what waits, so that the burst runs it too
        try:
            relay.run_once()
        except DatabaseError as exc:
            logger.warning("relay: the database failed (%s)", exc)
        return None
    relay.start()
    return relay
