"""What the threads of one worker share: the claims in hand, the outbox, the events.

The main loop, the job threads, the renewer, the repairer and the stop all work on one
``WorkerState``. Each of them takes it explicitly, so what a part may touch reads in
its signature, not in a base class it inherits from.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..probes import Contact
from ..results import RepairReport
from ..sharded import AnyLedger
from .config import Metrics, NoMetrics, WorkerConfig
from .handler import Handler, Job, Outcome, Plan

__all__ = ["Counts", "Entry", "WorkerState"]

log = logging.getLogger("django_ledger.worker")


@dataclass(eq=False, slots=True)
class Entry:
    """One claim in hand, from its claim to its settlement.

    ``started`` and ``finished`` change under the worker's lock: a job starts only if
    nothing finished it first (given back on a stop, or lost), so a claim is either run
    or given back, never both.
    """

    queue: str
    job: Job
    handler: Handler
    lease: float
    plan: Plan | None = None
    async_future: concurrent.futures.Future[Any] | None = None
    started: float | None = None
    thread_id: int | None = None
    #: Set once an outcome is decided (by the run, its time-out or its loss), or once the
    #: claim is given back or lost before it started.
    finished: bool = False
    #: When (``time.monotonic``) the last call that set its lease was sent, and the lease
    #: it asked for: the lease holds at least until ``confirmed_at + lease_for`` (the
    #: server's clock starts it later), whatever paused this process meanwhile.
    confirmed_at: float = 0.0
    lease_for: float = 0.0

    def confirmed(self, sent: float, lease: float) -> None:
        """Note a claim or renewal of this claim's lease, sent at ``sent`` for ``lease`` s."""
        if sent >= self.confirmed_at:
            self.confirmed_at, self.lease_for = sent, lease

    def may_lapse(self, now: float) -> bool:
        """Whether its lease may have ended, or may end before its start is marked.

        Past two thirds of the lease since the last confirmation: renewals come every
        third of it, so only a process paused (SIGSTOP, a VM frozen) or cut off from
        Redis gets there, and then the server may have given the claim to another.
        """
        return now >= self.confirmed_at + self.lease_for * 2 / 3


@dataclass
class Counts:
    """What a worker did since it started: its last log line and its heartbeat say it."""

    processed: int = 0
    failed: int = 0
    retried: int = 0
    lost: int = 0
    claimed: int = 0


class WorkerState:
    """The state every thread of one worker reads and writes.

    ``lock`` guards ``in_hand``, ``outbox`` and the ``started``, ``finished`` and
    ``thread_id`` of every entry; the events need no lock.
    """

    def __init__(
        self,
        ledgers: dict[str, AnyLedger],
        handlers: dict[str, Handler],
        leases: dict[str, float],
        config: WorkerConfig,
        metrics: Metrics | None,
    ) -> None:
        self.ledgers = ledgers
        self.handlers = handlers
        self.leases = {queue: float(leases[queue]) for queue in ledgers}
        self.config = config
        self.metrics: Metrics = metrics or NoMetrics()
        #: Whether anyone reads the metrics: the hot path skips measuring otherwise.
        self.metered = metrics is not None
        self.worker_id = config.worker_id
        self.queues = list(ledgers)
        self.counts = Counts()
        #: What this worker's repairs did, added up (its last log line says it).
        self.repaired = RepairReport()
        self.lock = threading.Lock()
        self.in_hand: dict[tuple[str, str, int], Entry] = {}
        #: Outcomes decided and not yet collected by the main loop.
        self.outbox: list[tuple[Entry, Outcome]] = []
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.forced = threading.Event()
        self.hard_exit = threading.Event()
        self.done = threading.Event()
        #: Set when a job starts: the cancel listener (``cancels.py``) listens while any runs.
        self.running = threading.Event()
        #: Tasks started (``max_tasks_per_child`` counts them), and why this worker
        #: recycles, once it does: it then starts no more.
        self.started = 0
        #: When the main loop last turned (``time.time()``), and whether it is inside a
        #: task it runs itself now (the heartbeat then counts the loop as turning).
        self.loop_at = time.time()
        self.loop_busy = False
        self.recycle: str | None = None
        #: Whether Redis answers the calls this worker makes (``/readyz``).
        self.contact = Contact()
        #: Threads beside the main loop and the pool, joined when the worker ends.
        self.threads: list[threading.Thread] = []

    def may_start(self) -> bool:
        """Count a task about to start, unless the worker recycles (call holding ``lock``)."""
        limit = self.config.max_tasks_per_child
        if self.recycle is not None:
            return False
        self.started += 1
        if limit is not None and self.started >= limit:
            self.recycle = f"{limit} tasks started"
            self.wake.set()
        return True

    def request_stop(self) -> None:
        """Stop gracefully; a second call stops at once."""
        if self.stopping.is_set():
            self.forced.set()
        self.stopping.set()
        self.wake.set()

    def spawn(self, name: str, target: Callable[[], None]) -> None:
        """Start a daemon thread that the worker joins when it ends."""
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def in_hand_count(self) -> int:
        with self.lock:
            return len(self.in_hand)

    def drop(self, entry: Entry) -> None:
        """Forget a claim in hand (the caller holds the lock)."""
        claim = entry.job.claim
        self.in_hand.pop((entry.queue, claim.request_id, claim.fence), None)

    def lose_unstarted(self, entry: Entry) -> bool:
        """Finish and forget ``entry`` lost before it started (counted lost); whether it was."""
        with self.lock:
            unstarted = entry.started is None and not entry.finished
            if unstarted:  # it never starts now: nothing runs, nothing is settled
                entry.finished = True
                self.drop(entry)
        if unstarted:
            self.count_lost(entry)
        return unstarted

    def count_lost(self, entry: Entry) -> None:
        """Count a lost attempt: the worker's counts, its metrics, and its counters
        (``core/counters.py``), if kept.

        And tell ``WorkerConfig.on_outcome`` of it, if anyone listens.
        """
        self.counts.lost += 1
        self.metrics.lost(entry.queue)
        if self.config.on_outcome is not None:
            self.config.on_outcome(entry.queue, entry.job.claim, "lost")
        heartbeats = self.config.heartbeats
        if heartbeats is not None:
            heartbeats.tally.add(entry.queue, entry.plan.name if entry.plan else "", "lost")

    def finish(self, entry: Entry, outcome: Outcome) -> None:
        """Hand an outcome to the main loop, unless one was decided already."""
        with self.lock:
            if entry.finished:
                return
            entry.finished = True
            if not entry.job.lost.is_set():
                self.outbox.append((entry, outcome))
                # The loop clears the flag before it collects: a flag still set here
                # means the loop has yet to collect, this outcome with the rest.
                if not self.wake.is_set():
                    self.wake.set()
                return
            self.drop(entry)
        self.count_lost(entry)
        log.warning(
            "outcome=lost queue=%s id=%s attempt=%d fence=%d: the lease was lost while it ran; "
            "its outcome (%s) is not written",
            entry.queue,
            entry.job.claim.request_id,
            entry.job.claim.attempt,
            entry.job.claim.fence,
            outcome.state.value,
        )
        self.wake.set()

    def quietly(self, work: Callable[[], None]) -> None:
        """Do ``work``; a failure is only worth a DEBUG line (a first beat, a last forget)."""
        try:
            work()
        except Exception as exc:
            log.debug("worker %s: %s", self.worker_id, exc)
