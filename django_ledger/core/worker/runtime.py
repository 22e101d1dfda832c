"""The worker runtime: claim, run, renew, settle, repair; nothing lost when it dies.

One ``Worker`` serves queues of one namespace with a pool of threads (and an event loop
for coroutine handlers). Its threads, each with one job:

- the main loop (a thread of its own; ``run`` waits for it): settles finished jobs and
  claims more in the same script call (``Ledger.settle_and_claim``), keeping up to
  ``concurrency + prefetch`` claims in hand. With ``concurrency`` 1 it runs a job that
  has no time-out to watch right there, between two calls, with no hand-off to another
  thread; the rest go to the pool;
- the renewer: every third of a lease, one ``renew_many`` per queue for every claim in
  hand; a renewal answered LOST marks the job lost (its outcome will not be written, the
  fence refuses it) and is logged; it also ends runs past their time-out, and beats;
- the repairer: repair pages of every queue (``Ledger.repair_page``), so a task whose
  worker died comes back soon after its lease ends, with no other process deployed.

Stopping (``request_stop``, from SIGTERM or SIGINT): no more claims; claims that never
started go back at once without spending an attempt (``Ledger.release``); running jobs get
``shutdown_timeout`` to finish and settle; then ``run`` returns 0. A second request stops
at once: leases then run out and repair gives the tasks back. ``run`` keeps these promises
for a job the main loop runs itself too, by giving up waiting for the loop. This module
imports no Django: ``manage.py ledger_worker`` builds it from settings.

This module holds ``Worker`` and its main loop; the rest lives beside it, each part
taking the shared ``state.WorkerState``: ``runs`` (running jobs), ``upkeep`` (the
renewer and the repairer), ``idle`` (the idle wait), ``stopping`` (a stop's promises),
``outcomes`` (counts, log lines, traces), ``interrupt`` (time-outs) and ``config``
(``WorkerConfig``, ``Metrics``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict

from ..arguments import SettleItem
from ..errors import LedgerError
from ..lane import borrowed
from ..probes import Verdict
from ..records import State
from ..results import Claim, Claims, earliest
from ..sharded import AnyLedger
from ..transport import MAX_BATCH
from .cancels import CancelListener
from .config import EXIT_RECYCLE, Metrics, WorkerConfig, default_worker_id
from .handler import Handler, Job, Outcome
from .health import stall_for_tests
from .idle import Idle
from .outcomes import settled
from .recycle import Recycle
from .runs import Runs
from .state import Entry, WorkerState
from .stopping import Stop
from .upkeep import Renewer, Repairer

__all__ = ["Metrics", "Worker", "WorkerConfig", "default_worker_id"]

log = logging.getLogger("django_ledger.worker")


class Worker:
    """Serve the given queues until stopped (or, with ``burst``, until nothing is due)."""

    def __init__(
        self,
        ledgers: dict[str, AnyLedger],
        handlers: dict[str, Handler],
        leases: dict[str, float],
        config: WorkerConfig | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        if not ledgers:
            raise ValueError("a worker needs at least one queue")
        missing = sorted(set(ledgers) - set(handlers))
        if missing:
            raise ValueError(f"no handler for queue(s): {', '.join(missing)}")
        self.config = config or WorkerConfig()
        state = self._state = WorkerState(ledgers, handlers, leases, self.config, metrics)
        self.ledgers = state.ledgers
        self.handlers = state.handlers
        self.leases = state.leases
        self.metrics: Metrics = state.metrics
        self.worker_id = state.worker_id
        self.counts = state.counts
        self._prefetch = (
            self.config.concurrency if self.config.prefetch is None else self.config.prefetch
        )
        #: Outcomes collected from the outbox, by queue, for the next call to settle.
        self._unsettled: dict[str, list[tuple[Entry, Outcome]]] = defaultdict(list)
        self._turn = 0
        self._runs = Runs(state)
        self._stop = Stop(state)
        self._renewer = Renewer(state)
        self._repairer = Repairer(state) if self.config.repair or self.config.rooms else None
        self._loop_error: BaseException | None = None
        #: The idle wait: due times, quiet queues, the waker (``idle.py``).
        self._idle = Idle(state)
        self._recycle = Recycle(state)
        #: Hears operators' cancels of the jobs running here (``cancels.py``).
        self._cancels = CancelListener(state)

    # -- the outside ----------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop gracefully; a second call stops at once."""
        self._state.request_stop()

    @property
    def stopping(self) -> bool:
        return self._state.stopping.is_set()

    def readiness(self, max_outage: float) -> Verdict:
        """``/readyz``: not while stopping or recycling, nor past ``max_outage`` s of no Redis."""
        state = self._state
        return state.contact.readiness(max_outage, state.stopping.is_set(), state.recycle)

    @property
    def abandoned(self) -> bool:
        """Whether a stop left jobs running past the grace: exit without joining them.

        Their leases bring them back; joining a stuck thread would hang the process.
        """
        return self._stop.abandoned

    def loop_age(self) -> float:
        """Seconds since the main loop last turned (0 while it runs a task itself)."""
        state = self._state
        return 0.0 if state.loop_busy else max(0.0, time.time() - state.loop_at)

    def in_hand(self) -> list[Job]:
        with self._state.lock:
            return [entry.job for entry in self._state.in_hand.values()]

    def run(self) -> int:
        """Work until stopped; return the exit code (0 after a clean stop)."""
        state = self._state
        log.info(
            "worker %s started on %s (concurrency %d, prefetch %d%s)",
            self.worker_id,
            ", ".join(state.queues),
            self.config.concurrency,
            self._prefetch,
            ", burst" if self.config.burst else "",
        )
        self._start_threads()
        loop = threading.Thread(target=self._main_loop_thread, name="ledger-main", daemon=True)
        loop.start()
        try:
            self._stop.supervise(
                loop, lambda: self._runs.running_here is not None, self._idle.waker.nudge
            )
            if self._loop_error is not None:
                raise self._loop_error
        finally:
            state.done.set()
            state.wake.set()
            forced = state.forced.is_set() or state.hard_exit.is_set() or self.abandoned
            self._runs.shutdown(wait=not forced)
            for thread in state.threads:
                thread.join(timeout=0 if forced else 5)
            if self.config.heartbeats is not None and not forced:
                state.quietly(lambda: self.config.heartbeats.forget(self.worker_id))  # type: ignore[union-attr]
        log.info(
            "worker %s stopped: %d processed, %d failed, %d retried, %d lost%s",
            self.worker_id,
            self.counts.processed,
            self.counts.failed,
            self.counts.retried,
            self.counts.lost,
            self._repair_summary(),
        )
        if state.hard_exit.is_set():
            return 3
        if state.forced.is_set():
            return 1
        return EXIT_RECYCLE if state.recycle and not state.stopping.is_set() else 0

    def _repair_summary(self) -> str:
        """What this worker's repairs did, for its last line (a burst run always says)."""
        with self._state.lock:
            counts = self._state.repaired.counts()
        counts.pop("scanned")
        counts.pop("stale")  # changed since read: nothing was done to them
        done = " ".join(f"{name}={value}" for name, value in counts.items() if value)
        if done:
            return f"; repaired {done}"
        return "; repaired nothing" if self.config.burst and self._repairer else ""

    def _start_threads(self) -> None:
        state = self._state
        state.quietly(self._renewer.beat)  # on the Workers page from the start, not a beat later
        state.spawn("ledger-renewer", self._renewer.run)
        if self._repairer is not None:
            state.spawn("ledger-repairer", self._repairer.run)
        # Not joined at the end: a thread in a blocking call ends with its block (<= 1 s).
        self._idle.waker.start()
        self._cancels.start()

    # -- the main loop ------------------------------------------------------------------

    def _main_loop_thread(self) -> None:
        try:
            with borrowed(*(ledger.redis for ledger in self.ledgers.values())):
                self._main_loop()  # its script calls on one connection borrowed from the pool
        except BaseException as exc:  # raised again by ``run``, on the caller's thread
            self._loop_error = exc

    def _main_loop(self) -> None:
        state = self._state
        deadline: float | None = None
        while not state.forced.is_set() and not state.done.is_set():
            state.loop_at = time.time()
            stall_for_tests()
            state.wake.clear()
            self._linger()
            self._collect()
            # A stop asked for gives back what never started, and so does a recycle (with
            # no deadline: what started runs to its end); --max-tasks only stops claiming.
            asked = state.stopping.is_set()
            recycling = self._recycle.due()
            stopping = asked or recycling or self._claims_left() == 0
            if stopping and deadline is None:
                deadline = float("inf")  # --max-tasks, a recycle: the claimed ones all run
            if asked:
                deadline = self._stop.begin()
            elif recycling:
                self._stop.release_unstarted()
            room = 0 if stopping else self._room()
            claimed, drained, worked = self._settle_and_claim(room)
            if state.metered:
                state.metrics.in_flight(state.in_hand_count())
            if self._runs.backlog:
                self._runs.run_next()
            if stopping:
                if not state.in_hand_count() and not self._pending_settlements():
                    return
                assert deadline is not None
                if time.monotonic() >= deadline:
                    self._stop.abandon()
                    return
                state.wake.wait(0.05)
                continue
            pending = self._pending_settlements()
            idle_now = not state.in_hand_count() and not pending
            if self.config.burst and drained and idle_now:
                # Expired leases are not due until repair gives them back: a burst run
                # (perhaps the only process a cron deployment runs) sweeps them first.
                if self._repairer is not None and self._repairer.sweep():
                    continue
                return
            # Fewer were due than wanted: wait for work or to be woken (armed); no room and
            # nothing done: wait for a run to finish.
            if room > claimed or not (claimed or worked):
                self._idle.wait(room > claimed, pending, empty=idle_now)

    def _linger(self) -> None:
        """While claims wait ahead of the threads, gather a few more outcomes per round trip.

        Nothing starves meanwhile (the waiting claims keep every thread busy), and one
        ``settle_and_claim`` then carries several settlements: well under one round trip
        per task at full load. With nothing waiting (``--prefetch 0``) it settles at once,
        and with concurrency 1 nothing else can finish meanwhile.
        """
        if self._runs.backlog is not None:
            return
        state = self._state
        with state.lock:
            waiting = sum(1 for entry in state.in_hand.values() if entry.started is None)
            gathered = len(state.outbox)
        if waiting and 0 < gathered < max(2, self.config.concurrency // 2):
            state.forced.wait(0.002)

    def _claims_left(self) -> int | None:
        if self.config.max_tasks is None:
            return None
        return max(0, self.config.max_tasks - self.counts.claimed)

    def _room(self) -> int:
        # Jobs that finished and wait to be settled in this very round are free already:
        # the settle-and-claim that settles them claims their successors (one round trip
        # per task with --concurrency 1 --prefetch 0, not two).
        settling = sum(len(items) for items in self._unsettled.values())
        in_hand = self._state.in_hand_count()
        room = self.config.concurrency + self._prefetch - (in_hand - settling)
        left = self._claims_left()
        if left is not None:
            room = min(room, left)
        return max(0, room)

    def _pending_settlements(self) -> bool:
        with self._state.lock:
            return bool(self._state.outbox) or any(self._unsettled.values())

    def _collect(self) -> None:
        state = self._state
        with state.lock:
            finished, state.outbox = state.outbox, []
        for entry, outcome in finished:
            self._unsettled[entry.queue].append((entry, outcome))

    def _settle_and_claim(self, room: int) -> tuple[int, bool, bool]:
        """Settle what finished and claim up to ``room``; say (claimed, nothing due, worked).

        Nothing is due when every queue was asked for the room left and, together, they
        gave less than that. Claims beyond the threads free now are held (prefetched, not
        started: ``Ledger.claim_many(hold_after=)``); the same call marks started those
        held claims whose jobs have started since, so no round trip is spent on it.
        """
        state = self._state
        queues = state.queues
        claimed, failed, worked = 0, False, False
        free = self._free_threads()
        marks = self._start_marks()
        # A queue whose wake key this worker popped gets its call even with no room: a
        # call that claims none passes the wake-up on when something is due (claiming.lua).
        idle = self._idle
        popped = idle.waker.take_popped()
        waits: list[int | None] = []
        now = time.monotonic()
        turn = self._turn = (self._turn + 1) % len(queues)
        for queue in queues[turn:] + queues[:turn]:
            items = self._unsettled.get(queue, [])
            started = marks.get(queue, [])
            want = min(room - claimed, MAX_BATCH)
            if not items and not started and queue not in popped:
                if want <= 0:
                    continue
                # Seconds the queue stays quiet (inf: until woken; <= 0: not quiet).
                quiet = idle.quiet.get(queue, 0.0) - now
                if quiet > 0:  # nothing due there until then, and no wake-up since
                    waits.append(None if quiet == float("inf") else int(quiet * 1000) + 1)
                    continue
            lease = self.leases[queue]
            settle: list[SettleItem] = [
                (entry.job.claim, State.CLAIMED, lease) for entry in started
            ]
            settle += [
                (entry.job.claim, outcome.state, outcome.delay, outcome.result)
                for entry, outcome in items
            ]
            sent = time.monotonic()
            try:
                settlements, claims = self.ledgers[queue].settle_and_claim(
                    settle,
                    self.worker_id,
                    max(0, want),
                    self.leases[queue],
                    hold_after=max(0, free - claimed),
                )
            except LedgerError as exc:  # unavailable, or refused (maxmemory): keep the items
                log.warning("worker %s: queue %s: %s", self.worker_id, queue, exc)
                state.contact.after(exc)
                idle.forget(queue)
                failed = True
                state.wake.wait(0.5)
                continue
            state.contact.answered()
            self._unsettled[queue] = []
            if started:
                marked = settlements[: len(started)]
                self._renewer.took(started, [lease] * len(started), marked, sent)
            if items:
                worked = True
                settled(state, items, settlements[len(started) :])
            claimed += len(claims)
            if want > 0 and isinstance(claims, Claims):
                waits.append(claims.due_in_ms)
                idle.note(queue, claims.due_in_ms, len(claims) < want, now)
            elif want > 0:
                waits.append(None)
            self._start(queue, claims, sent)
        idle.due_in_ms = earliest(*waits)
        idle.failed = failed
        drained = room > 0 and claimed < room and not failed
        return claimed, drained, worked

    def _free_threads(self) -> int:
        """Threads with no job to run now: claims beyond them would wait (are held)."""
        with self._state.lock:
            busy = sum(1 for entry in self._state.in_hand.values() if not entry.finished)
        return max(0, self.config.concurrency - busy)

    def _start_marks(self) -> dict[str, list[Entry]]:
        """Held claims to mark started: their jobs started, or (concurrency 1) start next.

        A job the main loop runs itself starts right after this call: it is marked in it.
        """
        marks: dict[str, list[Entry]] = defaultdict(list)
        backlog = self._runs.backlog
        upcoming = backlog[0] if backlog else None
        with self._state.lock:
            for entry in self._state.in_hand.values():
                claim = entry.job.claim
                begun = entry.started is not None or entry is upcoming
                if claim.held and begun and not entry.finished:
                    marks[entry.queue].append(entry)
        return marks

    def _start(self, queue: str, claims: list[Claim], sent: float) -> None:
        """Take new claims in hand (claimed by a call sent at ``sent``); queue their jobs."""
        if not claims:
            return
        ledger, handler, lease = self.ledgers[queue], self.handlers[queue], self.leases[queue]
        retried = [claim.request_id for claim in claims if claim.attempt > 1]
        previous: dict[str, bytes | None] = {}
        if retried:
            try:
                previous = dict(zip(retried, ledger.results(retried), strict=True))
            except LedgerError as exc:
                log.warning("worker %s: could not read earlier results: %s", self.worker_id, exc)
        self.counts.claimed += len(claims)
        started_ms = int(lease * 1000)
        worker_id = self.worker_id
        entries = [
            Entry(
                queue,
                Job(
                    claim,
                    queue,
                    worker_id,
                    claim.lease_until - started_ms,
                    previous.get(claim.request_id) if previous else None,
                ),
                handler,
                lease,
                confirmed_at=sent,
                lease_for=lease,
            )
            for claim in claims
        ]
        state = self._state
        with state.lock:
            for entry in entries:
                claim = entry.job.claim
                state.in_hand[(queue, claim.request_id, claim.fence)] = entry
        self._runs.submit(entries)
