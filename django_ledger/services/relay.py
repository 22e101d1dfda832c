"""The relay: delivers the outbox rows a crash or a Redis outage left behind.

The committer admits its rows on commit; the relay takes whatever is left, oldest first,
in batches, each in a transaction of its own: on PostgreSQL (and any database that has
it) the batch is ``SELECT ... FOR UPDATE SKIP LOCKED``, so relays running at once take
different rows; on SQLite, where a transaction that writes holds the whole database,
batches go one at a time. Admission is idempotent by id, so a row admitted twice (by
the committer and a relay, or by a relay that died before deleting it) answers
``DUPLICATE`` and is deleted: its task is admitted once.

It walks the rows of its own target (``outbox/target.py``: the namespace and Redis its
settings name) and those written before rows had one, each walk going on from the last
row it took (``Walk``), so rows it keeps never hold back newer ones; a row the ledger
refuses for good is dropped with an error; a relay that keeps running (``beat``) leaves
rows younger than ``YOUNG`` seconds to their committer.

``manage.py ledger_relay`` runs it; ``ledger_worker`` beats it beside repair, in the
repairer's thread (a room of ``core/worker/upkeep.py``), unless ``--no-relay``.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from typing import Any

from django.db import DatabaseError, connections, transaction
from django.db.models import Q
from django.utils import timezone

from ..outbox.delivery import ROW_COLUMNS, Row, delete_ids, deliver_rows
from ..outbox.effects import prune_effects
from ..outbox.models import OutboxEntry
from ..outbox.options import transaction_options
from ..outbox.tables import outbox_ready
from ..outbox.target import LEGACY, outbox_target
from ..queues import queues
from .worker import ledger_backends

__all__ = [
    "DEFAULT_BATCH",
    "YOUNG",
    "Relay",
    "Walk",
    "outbox_databases",
    "walk_batch",
    "worker_relay",
]

logger = logging.getLogger("django_ledger.relay")

#: Rows per batch: one ``admit_many`` (128 per Redis round trip) and one delete each.
DEFAULT_BATCH = 500
#: Seconds between looks at an empty outbox.
DEFAULT_INTERVAL = 1.0
#: Seconds a beat beside repair delivers for at most, before repair gets its turn.
BEAT_BUDGET = 0.25
#: Seconds a committed row is left to its committer (the courier, or the committing
#: thread) before a beat takes it: a relay that keeps running delivers what a crash or
#: an outage left, not rows on their way (each would answer DUPLICATE).
YOUNG = 5.0
#: Seconds between prunes of old effects rows, when pruning.
PRUNE_EVERY = 3600.0


def outbox_databases() -> list[str]:
    """The databases whose outbox a relay serves: those of ``TASKS``' outbox backends."""
    found: list[str] = []
    for params in ledger_backends():
        try:
            options = transaction_options(params.get("OPTIONS") or {})
        except (TypeError, ValueError):
            continue  # E065 says so
        if options.mode == "outbox" and options.database not in found:
            found.append(options.database)
    return found


class Walk:
    """A relay's pass over one outbox (a database, a target), oldest first.

    It goes on from the last row it took, so rows it keeps (a full queue, a queue this
    process refuses) never hold back the rows behind them; the queues that kept rows are
    passed over for the rest of the pass. A pass ends at the last row (or when Redis is
    away); the next starts again from the oldest.
    """

    def __init__(self, database: str, target: str) -> None:
        self.database = database
        self.target = target
        self.restart()

    def restart(self) -> None:
        #: (created_at, id) of the last row taken, or ``None`` at the start of a pass.
        self.after: tuple[Any, str] | None = None
        self.stalled: set[str] = set()


def walk_batch(walk: Walk, batch: int = DEFAULT_BATCH, before: Any = None) -> tuple[int, int, bool]:
    """Deliver the next batch of ``walk``; return (delivered, kept, whether the pass goes on).

    Three statements and one ``admit_many`` per queue: the ``SELECT`` of the batch (rows
    as tuples, no model instances), the admission, the ``DELETE`` of what was delivered.
    ``before``: take only rows written before that instant (younger ones are left to
    their committer, which delivers them at once).
    """
    database = walk.database
    configured = queues.names()
    rows = OutboxEntry.objects.using(database).filter(target=walk.target, queue__in=configured)
    if before is not None:
        rows = rows.filter(created_at__lt=before)
    if walk.after is not None:
        # Behind the last row taken, in (created_at, id) order: the index's range starts
        # at created_at, the id breaks ties (enqueue_many's rows share their created_at).
        at, key = walk.after
        rows = rows.filter(created_at__gte=at).filter(Q(created_at__gt=at) | Q(id__gt=key))
    if walk.stalled:
        rows = rows.exclude(queue__in=sorted(walk.stalled))
    rows = rows.order_by("created_at", "id")
    with transaction.atomic(using=database):
        if connections[database].features.has_select_for_update_skip_locked:
            rows = rows.select_for_update(skip_locked=True)
        else:
            # SQLite: write first, so this transaction holds the database's write lock
            # and two relays' batches go one after the other.
            delete_ids(database, [""])
        taken = list(rows.values_list(*ROW_COLUMNS, "created_at")[:batch])
        if not taken:
            walk.restart()
            return 0, 0, False
        walk.after = (taken[-1][-1], taken[-1][0])
        delivered = deliver_rows(Row(*values[:-1]) for values in taken)
        delete_ids(database, delivered.done)
    walk.stalled |= delivered.stalled
    going = len(taken) >= batch and not delivered.away
    if not going:
        walk.restart()
    return len(delivered.done), len(delivered.kept), going


class Relay:
    """The relay of some databases: ``run_once`` drains them, ``beat`` delivers a bounded part.

    ``ledger_worker`` beats it beside repair, in the repairer's thread (a ``Room`` of
    ``core/worker/upkeep.py``); ``ledger_relay --loop`` beats it in a loop of its own
    (``run``), until ``stop`` is set. It delivers the rows of this process's target
    (``outbox/target.py``) and those written before rows had one. A beat leaves rows
    younger than ``young`` seconds to their committer; ``run_once`` takes every row.
    """

    name = "relay"

    def __init__(
        self,
        databases: list[str] | None = None,
        *,
        batch: int = DEFAULT_BATCH,
        interval: float = DEFAULT_INTERVAL,
        prune_days: float | None = None,
        young: float = YOUNG,
    ) -> None:
        if batch < 1:
            raise ValueError(f"batch must be at least 1, got {batch}")
        if not young >= 0:
            raise ValueError(f"young must be 0 or more seconds, got {young}")
        self.databases = outbox_databases() if databases is None else databases
        self.batch = batch
        self.interval = interval
        self.prune_days = prune_days
        self.young = young
        self.stop = threading.Event()
        self._pruned_at: float | None = None
        self._failing = False
        #: The beats' walks, kept from one beat to the next; and whose turn is first.
        self._walks: dict[tuple[str, str], Walk] = {}
        self._turn = 0

    def places(self) -> list[tuple[str, str]]:
        """Per database, this process's target, then the old rows' (``LEGACY``)."""
        target = outbox_target()
        return [(database, where) for database in self.databases for where in (target, LEGACY)]

    def run_once(self) -> int:
        """Deliver every row there is now (batch after batch); return how many."""
        delivered = 0
        for place in self.places():
            walk = Walk(*place)
            while not self.stop.is_set():
                done, _, going = walk_batch(walk, self.batch)
                delivered += done
                if not going:
                    break  # drained, or what is left waits for Redis
        return delivered

    def prune(self) -> int:
        """Delete effects rows older than ``prune_days``; return how many."""
        if self.prune_days is None:
            return 0
        return sum(prune_effects(database, self.prune_days) for database in self.databases)

    def beat(self) -> float:
        """Deliver batches for up to ``BEAT_BUDGET`` seconds; return the seconds to the next beat.

        ``0`` when a walk was cut short by the budget (more waits), else ``interval``. A
        walk goes on at the next beat where it stopped; the walks take turns going first.
        A database failure is logged once per outage and tried again a beat later.
        """
        started = time.monotonic()
        delivered, more = 0, False
        before = timezone.now() - timedelta(seconds=self.young)
        try:
            walks = [self._walks.setdefault(place, Walk(*place)) for place in self.places()]
            first = self._turn % len(walks) if walks else 0
            for position in range(len(walks)):
                walk = walks[(first + position) % len(walks)]
                connections[walk.database].close_if_unusable_or_obsolete()
                while True:
                    done, _, going = walk_batch(walk, self.batch, before)
                    delivered += done
                    if not going:
                        break
                    if time.monotonic() - started > BEAT_BUDGET:
                        more = True
                        break
                if more:  # the next beat starts with the walk after this one
                    self._turn = first + position + 1
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
            self._walks.clear()
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


def worker_relay(*, burst: bool) -> Relay | None:
    """The relay of a ``ledger_worker``, to beat beside repair; ``--burst`` drains it now.

    ``None`` when there is no outbox to serve (no outbox backend, or no table yet), or
    with ``burst``: the rows waiting are delivered before the burst, so that it runs them.
    """
    # A database without its outbox table (``migrate`` not run) is warned about once per
    # process (``outbox/tables.py``).
    ready = [database for database in outbox_databases() if outbox_ready(database)]
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
