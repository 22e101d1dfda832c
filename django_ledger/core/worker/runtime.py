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
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import logging
import os
import socket
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

import redis.exceptions as redis_errors

from ..errors import LedgerError, LedgerUnavailable
from ..ledger import Ledger
from ..records import State
from ..results import Claim, Settlement, SettlementStatus
from ..transport import MAX_BATCH
from . import tracing
from .handler import Backoff, Handler, Job, Outcome, Plan
from .heartbeat import Heartbeats, WorkerInfo
from .pool import JobThreads

__all__ = ["Metrics", "Worker", "WorkerConfig", "default_worker_id"]

log = logging.getLogger("django_ledger.worker")

_IDLE_FIRST = 0.01
_IDLE_MOST = 0.5


def default_worker_id() -> str:
    """Host name, process id and a short random tag: unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Metrics(Protocol):
    """Where the worker reports what it does (``metrics.PrometheusMetrics``, or nothing)."""

    def outcome(self, queue: str, name: str, outcome: str, seconds: float | None) -> None: ...
    def lost(self, queue: str) -> None: ...
    def in_flight(self, count: int) -> None: ...
    def depth(self, queue: str, pending: int) -> None: ...


class _NoMetrics:
    def outcome(self, queue: str, name: str, outcome: str, seconds: float | None) -> None:
        pass

    def lost(self, queue: str) -> None:
        pass

    def in_flight(self, count: int) -> None:
        pass

    def depth(self, queue: str, pending: int) -> None:
        pass


@dataclass
class WorkerConfig:
    """How a worker runs. Durations are seconds."""

    worker_id: str = field(default_factory=default_worker_id)
    #: Jobs running at once (threads; coroutines share the event loop within the bound).
    concurrency: int = 8
    #: Claims held beyond the running ones, ready to start (``None``: as many as running).
    prefetch: int | None = None
    #: Run what is due now, wait for what is in flight, then return 0.
    burst: bool = False
    #: Stop claiming after this many claims, finish them, then return 0.
    max_tasks: int | None = None
    #: How long running jobs get to finish once a stop is asked for.
    shutdown_timeout: float = 30.0
    #: Run repair pages of every queue from inside the worker.
    repair: bool = True
    #: Seconds between repair pages (``None``: a sixth of the shortest lease, 0.5 to 5 s).
    repair_interval: float | None = None
    #: Records per repair page.
    repair_count: int = 100
    #: Write a heartbeat every renewal beat (``None``: no heartbeat).
    heartbeats: Heartbeats | None = None
    #: After a run past its time-out is settled, stop at once and return 3, leaving the
    #: stuck thread to the process's end (``--processes`` children: their parent starts
    #: another process, so a time-out stops the work itself).
    exit_on_timeout: bool = False

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.prefetch is not None and self.prefetch < 0:
            raise ValueError(f"prefetch must be 0 or more, got {self.prefetch}")
        if self.max_tasks is not None and self.max_tasks < 1:
            raise ValueError(f"max_tasks must be at least 1, got {self.max_tasks}")
        if self.shutdown_timeout < 0:
            raise ValueError(f"shutdown_timeout must be 0 or more, got {self.shutdown_timeout}")


@dataclass(eq=False, slots=True)
class _Entry:
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


@dataclass
class _Counts:
    processed: int = 0
    failed: int = 0
    retried: int = 0
    lost: int = 0
    claimed: int = 0


class Worker:
    """Serve the given queues until stopped (or, with ``burst``, until nothing is due)."""

    def __init__(
        self,
        ledgers: dict[str, Ledger],
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
        self.ledgers = ledgers
        self.handlers = handlers
        self.leases = {queue: float(leases[queue]) for queue in ledgers}
        self.config = config or WorkerConfig()
        self.metrics: Metrics = metrics or _NoMetrics()
        self._metered = metrics is not None
        self.worker_id = self.config.worker_id
        self.counts = _Counts()
        self._prefetch = (
            self.config.concurrency if self.config.prefetch is None else self.config.prefetch
        )
        self._lock = threading.Lock()
        self._in_hand: dict[tuple[str, str, int], _Entry] = {}
        self._outbox: list[tuple[_Entry, Outcome]] = []
        self._unsettled: dict[str, list[tuple[_Entry, Outcome]]] = defaultdict(list)
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._forced = threading.Event()
        self._hard_exit = threading.Event()
        self._done = threading.Event()
        self._queues = list(ledgers)
        self._turn = 0
        self._started_ms = int(time.time() * 1000)
        self._pool: JobThreads[_Entry] = JobThreads(
            self.config.concurrency, self._execute_pooled, "ledger-job"
        )
        #: With concurrency 1: claims waiting for the main loop to run them (or hand them
        #: to the pool's one thread); ``None`` otherwise, where the pool's queue holds them.
        self._backlog: deque[_Entry] | None = deque() if self.config.concurrency == 1 else None
        #: Jobs handed to the pool whose thread has not finished them (with a backlog only).
        self._queued = 0
        #: The job the main loop runs itself, if any (for ``run``'s stop deadline).
        self._running_here: _Entry | None = None
        #: When a stop asked for runs out of time (set once, by ``_begin_stop``).
        self._deadline: float | None = None
        self._loop_error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._threads: list[threading.Thread] = []
        #: Set when a stop left jobs running past ``shutdown_timeout`` (their leases
        #: bring them back): the process must exit without joining their threads.
        self.abandoned = False

    # -- the outside ----------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop gracefully; a second call stops at once."""
        if self._stopping.is_set():
            self._forced.set()
        self._stopping.set()
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def in_hand(self) -> list[Job]:
        with self._lock:
            return [entry.job for entry in self._in_hand.values()]

    def run(self) -> int:
        """Work until stopped; return the exit code (0 after a clean stop)."""
        log.info(
            "worker %s started on %s (concurrency %d, prefetch %d%s)",
            self.worker_id,
            ", ".join(self._queues),
            self.config.concurrency,
            self._prefetch,
            ", burst" if self.config.burst else "",
        )
        self._start_threads()
        loop = threading.Thread(target=self._main_loop_thread, name="ledger-main", daemon=True)
        loop.start()
        try:
            self._supervise(loop)
            if self._loop_error is not None:
                raise self._loop_error
        finally:
            self._done.set()
            self._wake.set()
            forced = self._forced.is_set() or self._hard_exit.is_set() or self.abandoned
            self._pool.shutdown(wait=not forced)
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self._loop.stop)
            for thread in self._threads:
                thread.join(timeout=0 if forced else 5)
            if self.config.heartbeats is not None and not forced:
                self._quietly(lambda: self.config.heartbeats.forget(self.worker_id))  # type: ignore[union-attr]
        log.info(
            "worker %s stopped: %d processed, %d failed, %d retried, %d lost",
            self.worker_id,
            self.counts.processed,
            self.counts.failed,
            self.counts.retried,
            self.counts.lost,
        )
        if self._hard_exit.is_set():
            return 3
        return 1 if self._forced.is_set() else 0

    # -- threads ----------------------------------------------------------------------

    def _start_threads(self) -> None:
        self._quietly(self._beat)  # on the Workers page from the start, not a beat later
        self._spawn(
            "ledger-renewer", lambda: self._every(self._renew_period, self._renew_and_watch)
        )
        if self.config.repair:
            interval = self.config.repair_interval
            if interval is None:
                interval = max(0.5, min(5.0, min(self.leases.values()) / 6))
            self._cursors = dict.fromkeys(self._queues, "0")
            self._spawn("ledger-repairer", lambda: self._every(interval, self._repair))

    def _spawn(self, name: str, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _renew_period(self) -> float:
        """A third of the shortest lease in hand: a task's own (``Plan.lease``) or a queue's."""
        now = time.monotonic()
        with self._lock:
            entries = list(self._in_hand.values())
        own = [e.plan.lease for e in entries if e.plan and e.plan.lease]
        period = min([*self.leases.values(), *own]) / 3
        # Wake in time for the earliest time-out too, not a beat late.
        for e in entries:
            if e.plan and e.plan.timeout and e.started is not None and not e.finished:
                period = min(period, e.plan.timeout - (now - e.started))
        return max(0.05, period)

    def _every(self, seconds: float | Callable[[], float], work: Callable[[], None]) -> None:
        period = seconds if callable(seconds) else (lambda: seconds)
        while not self._done.wait(period()):
            try:
                work()
            except LedgerUnavailable as exc:
                log.warning("worker %s: Redis unavailable: %s", self.worker_id, exc)
            except Exception:  # a bug here must not stop the worker: say it and go on
                log.exception("worker %s: %s failed", self.worker_id, work.__name__)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._spawn("ledger-loop", loop.run_forever)
                self._loop = loop
            return self._loop

    # -- the main loop ------------------------------------------------------------------

    def _supervise(self, loop: threading.Thread) -> None:
        """Wait for the main loop to end; while it runs a job itself, keep the stop's promises.

        The loop cannot give back prefetched claims, or give up on its job once the grace
        is over (at once on a second signal), while it is inside that job: this does.
        """
        while True:
            loop.join(0.1)  # a wait with a time-out: signals are handled meanwhile
            if not loop.is_alive():
                return
            if not self._stopping.is_set() or self._running_here is None:
                continue
            deadline = self._begin_stop()
            if self._forced.is_set():
                return
            if time.monotonic() >= deadline and self._running_here is not None:
                self._abandon()
                return

    def _main_loop_thread(self) -> None:
        try:
            self._main_loop()
        except BaseException as exc:  # raised again by ``run``, on the caller's thread
            self._loop_error = exc

    def _main_loop(self) -> None:
        idle = _IDLE_FIRST
        deadline: float | None = None
        while not self._forced.is_set() and not self._done.is_set():
            self._wake.clear()
            self._linger()
            self._collect()
            # A stop asked for gives back what never started; --max-tasks only stops claiming.
            asked = self._stopping.is_set()
            stopping = asked or self._claims_left() == 0
            if stopping and deadline is None:
                deadline = float("inf")  # --max-tasks: the claimed ones all run
            if asked:
                deadline = self._begin_stop()
            room = 0 if stopping else self._room()
            claimed, drained, worked = self._settle_and_claim(room)
            if self._metered:
                self.metrics.in_flight(self._in_hand_count())
            if self._backlog:
                self._run_next()
            if stopping:
                if not self._in_hand_count() and not self._pending_settlements():
                    return
                assert deadline is not None
                if time.monotonic() >= deadline:
                    self._abandon()
                    return
                self._wake.wait(0.05)
                continue
            idle_now = not self._in_hand_count() and not self._pending_settlements()
            if self.config.burst and drained and idle_now:
                return
            if claimed or worked:
                idle = _IDLE_FIRST
                if room > claimed:  # fewer were due than wanted: wait for work to finish
                    self._wake.wait(idle)
                continue
            self._wake.wait(idle)
            idle = min(idle * 2, _IDLE_MOST)

    def _begin_stop(self) -> float:
        """Give back what never started (said once per stop); return the stop's deadline.

        Called by the main loop, or by ``run`` while the loop runs a job itself; again on
        later rounds for claims a call still in flight at the stop brought in.
        """
        with self._lock:
            first = self._deadline is None
            if first:
                grace = 0.0 if self._hard_exit.is_set() else self.config.shutdown_timeout
                self._deadline = time.monotonic() + grace
            deadline = self._deadline
        assert deadline is not None
        self._release_unstarted()
        if first:
            log.info(
                "worker %s stopping: %d task(s) running get up to %.0f s to finish; "
                "a second signal stops at once",
                self.worker_id,
                self._in_hand_count(),
                self.config.shutdown_timeout,
            )
        return deadline

    def _abandon(self) -> None:
        log.warning(
            "worker %s: %d job(s) still running after %.1f s: leaving them to their leases",
            self.worker_id,
            self._in_hand_count(),
            self.config.shutdown_timeout,
        )
        self.abandoned = True

    def _linger(self) -> None:
        """While claims wait ahead of the threads, gather a few more outcomes per round trip.

        Nothing starves meanwhile (the waiting claims keep every thread busy), and one
        ``settle_and_claim`` then carries several settlements: well under one round trip
        per task at full load. With nothing waiting (``--prefetch 0``) it settles at once,
        and with concurrency 1 nothing else can finish meanwhile.
        """
        if self._backlog is not None:
            return
        with self._lock:
            waiting = sum(1 for entry in self._in_hand.values() if entry.started is None)
            gathered = len(self._outbox)
        if waiting and 0 < gathered < max(2, self.config.concurrency // 2):
            self._forced.wait(0.002)

    def _claims_left(self) -> int | None:
        if self.config.max_tasks is None:
            return None
        return max(0, self.config.max_tasks - self.counts.claimed)

    def _room(self) -> int:
        # Jobs that finished and wait to be settled in this very round are free already:
        # the settle-and-claim that settles them claims their successors (one round trip
        # per task with --concurrency 1 --prefetch 0, not two).
        settling = sum(len(items) for items in self._unsettled.values())
        room = self.config.concurrency + self._prefetch - (self._in_hand_count() - settling)
        left = self._claims_left()
        if left is not None:
            room = min(room, left)
        return max(0, room)

    def _in_hand_count(self) -> int:
        with self._lock:
            return len(self._in_hand)

    def _pending_settlements(self) -> bool:
        with self._lock:
            return bool(self._outbox) or any(self._unsettled.values())

    def _collect(self) -> None:
        with self._lock:
            finished, self._outbox = self._outbox, []
        for entry, outcome in finished:
            self._unsettled[entry.queue].append((entry, outcome))

    def _settle_and_claim(self, room: int) -> tuple[int, bool, bool]:
        """Settle what finished and claim up to ``room``; say (claimed, nothing due, worked).

        Nothing is due when every queue was asked for the room left and, together, they
        gave less than that.
        """
        claimed, failed, worked = 0, False, False
        turn = self._turn = (self._turn + 1) % len(self._queues)
        for queue in self._queues[turn:] + self._queues[:turn]:
            items = self._unsettled.get(queue, [])
            want = min(room - claimed, MAX_BATCH)
            if not items and want <= 0:
                continue
            settle = [
                (entry.job.claim, outcome.state, outcome.delay, outcome.result)
                for entry, outcome in items
            ]
            try:
                settlements, claims = self.ledgers[queue].settle_and_claim(
                    settle, self.worker_id, max(0, want), self.leases[queue]
                )
            except LedgerError as exc:  # unavailable, or refused (maxmemory): keep the items
                log.warning("worker %s: queue %s: %s", self.worker_id, queue, exc)
                failed = True
                self._wake.wait(0.5)
                continue
            self._unsettled[queue] = []
            if items:
                worked = True
                self._settled(items, settlements)
            claimed += len(claims)
            self._start(queue, claims)
        drained = room > 0 and claimed < room and not failed
        return claimed, drained, worked

    # -- claims in, outcomes out ----------------------------------------------------------

    def _start(self, queue: str, claims: list[Claim]) -> None:
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
            _Entry(
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
            )
            for claim in claims
        ]
        with self._lock:
            for entry in entries:
                claim = entry.job.claim
                self._in_hand[(queue, claim.request_id, claim.fence)] = entry
        if self._backlog is not None:
            self._backlog.extend(entries)
            return
        for entry in entries:
            self._pool.submit(entry)

    def _run_next(self) -> None:
        """With concurrency 1: start the next claim in the backlog, if the pool is idle.

        A job with no time-out to watch and no coroutine runs right here, on the main
        loop's thread: no hand-off to a thread and back, and its outcome goes out with the
        next call, which also claims its successor. The others go to the pool's thread
        (a time-out interrupts that thread, not the loop); one job runs at a time.
        """
        assert self._backlog is not None
        while self._backlog and not self._queued:
            entry = self._backlog.popleft()
            if entry.finished:  # given back or lost before it started
                continue
            plan = self._plan(entry)
            if plan is None:  # refused: settled with the next call
                continue
            if plan.timeout is None and not plan.is_async:
                self._running_here = entry
                try:
                    self._execute(entry)
                finally:
                    self._running_here = None
            else:
                with self._lock:
                    self._queued += 1
                self._pool.submit(entry)
            return

    def _execute_pooled(self, entry: _Entry) -> None:
        """Run one job on a pool thread."""
        try:
            self._execute(entry)
        except _TimedOut:
            pass  # meant for the run this thread had just ended, settled as timed out
        finally:
            if self._backlog is not None:
                with self._lock:
                    self._queued -= 1
                self._wake.set()  # the main loop may start the next one now

    def _execute(self, entry: _Entry) -> None:
        """Run one job on this thread (its outcome goes to the main loop's outbox)."""
        with self._lock:
            if entry.finished:  # given back or lost before it started
                return
            entry.thread_id = threading.get_ident()
            entry.started = time.monotonic()
        try:
            self._execute_started(entry)
        except _TimedOut:
            # Meant for this job (already settled as timed out), or, if the thread had just
            # moved on, for the one before: this job is then given back to run again.
            self._finish(entry, Outcome(State.PENDING, reason="interrupted"))
        finally:
            with self._lock:
                entry.thread_id = None

    def _plan(self, entry: _Entry) -> Plan | None:
        """Ask the handler how to run the job; one it cannot run is finished here."""
        job = entry.job
        try:
            plan = entry.handler.plan(job)
        except Exception as exc:
            log.exception("worker %s: job %s cannot be run", self.worker_id, job.claim.request_id)
            # A handler may say how a job it cannot run settles (with its reason stored).
            refused = getattr(entry.handler, "refused", None)
            outcome = refused(job, exc) if callable(refused) else None
            if not isinstance(outcome, Outcome):
                outcome = Outcome(State.FAILED, reason=f"unrunnable: {exc}")
            self._finish(entry, outcome)
            return None
        entry.plan = plan
        return plan

    def _execute_started(self, entry: _Entry) -> None:
        job = entry.job
        plan = entry.plan if entry.plan is not None else self._plan(entry)
        if plan is None:
            return
        name = plan.name or entry.queue
        try:
            if plan.is_async or not tracing.enabled():
                result = entry.handler.run(job, plan)
            else:
                with tracing.span(name, job.claim.traceparent, self._attributes(job)) as traced:
                    result = entry.handler.run(job, plan)
                    if isinstance(result, Outcome):
                        traced.outcome(result)
            if isinstance(result, Outcome):
                self._finish(entry, result)
                return
        except Exception as exc:
            self._finish(entry, self._handler_bug(entry, exc))
            return
        self._await(entry, result)

    def _await(self, entry: _Entry, awaitable: Awaitable[Outcome]) -> None:
        job, name = entry.job, (entry.plan.name if entry.plan else "") or entry.queue

        async def wrapped() -> Outcome:
            with tracing.span(name, job.claim.traceparent, self._attributes(job)) as traced:
                outcome = await awaitable
                traced.outcome(outcome)
                return outcome

        future = asyncio.run_coroutine_threadsafe(wrapped(), self._event_loop())
        entry.async_future = future

        def done(future: concurrent.futures.Future[Outcome]) -> None:
            if future.cancelled():
                return
            error = future.exception()
            if error is not None:
                self._finish(entry, self._handler_bug(entry, error))
            else:
                self._finish(entry, future.result())

        future.add_done_callback(done)

    def _handler_bug(self, entry: _Entry, exc: BaseException) -> Outcome:
        log.error(
            "worker %s: the handler of %s raised %r: retrying",
            self.worker_id,
            entry.queue,
            exc,
            exc_info=exc,
        )
        delay = Backoff().delay(entry.job.claim.attempt)
        return Outcome(State.PENDING, delay, reason=f"handler error: {type(exc).__name__}")

    def _finish(self, entry: _Entry, outcome: Outcome) -> None:
        """Hand an outcome to the main loop, unless one was decided already."""
        with self._lock:
            if entry.finished:
                return
            entry.finished = True
            if not entry.job.lost.is_set():
                self._outbox.append((entry, outcome))
                # The loop clears the flag before it collects: a flag still set here
                # means the loop has yet to collect, this outcome with the rest.
                if not self._wake.is_set():
                    self._wake.set()
                return
            self._drop(entry)
        self.counts.lost += 1
        self.metrics.lost(entry.queue)
        log.warning(
            "outcome=lost queue=%s id=%s attempt=%d fence=%d: the lease was lost while it ran; "
            "its outcome (%s) is not written",
            entry.queue,
            entry.job.claim.request_id,
            entry.job.claim.attempt,
            entry.job.claim.fence,
            outcome.state.value,
        )
        self._wake.set()

    def _drop(self, entry: _Entry) -> None:
        claim = entry.job.claim
        self._in_hand.pop((entry.queue, claim.request_id, claim.fence), None)

    def _settled(self, items: list[tuple[_Entry, Outcome]], answers: list[Settlement]) -> None:
        """Count, measure and log the outcomes one call settled (one line each)."""
        with self._lock:
            for entry, _ in items:
                self._drop(entry)
        now = time.monotonic()
        counts, metered = self.counts, self._metered
        # The level's check is cached by the logger: a disabled line costs no formatting.
        info, warning = log.isEnabledFor(logging.INFO), log.isEnabledFor(logging.WARNING)
        for (entry, outcome), answer in zip(items, answers, strict=True):
            state = outcome.state
            if answer.status is SettlementStatus.LOST:
                counts.lost += 1
                word, shown = "lost", warning
                if metered:
                    self.metrics.lost(entry.queue)
            elif state is State.COMPLETED:
                counts.processed += 1
                word, shown = "completed", info
            elif state is State.FAILED:
                counts.processed += 1
                counts.failed += 1
                word, shown = "failed", warning
            else:
                counts.retried += 1
                word, shown = "retry", info
            if not (shown or metered):
                continue
            seconds = None if entry.started is None else now - entry.started
            name = entry.plan.name if entry.plan is not None else ""
            if metered:
                self.metrics.outcome(entry.queue, name, word, seconds)
            if shown:
                self._log_outcome(entry, outcome, word, seconds, name, answer.reason)

    def _log_outcome(
        self,
        entry: _Entry,
        outcome: Outcome,
        word: str,
        seconds: float | None,
        name: str,
        reason: str | None,
    ) -> None:
        claim = entry.job.claim
        tail = f" retry_in={outcome.delay:.1f}" if word == "retry" else ""
        why = outcome.reason or reason
        if why:
            tail += f" reason={why}"
        log.log(
            logging.WARNING if word in ("lost", "failed") else logging.INFO,
            "outcome=%s queue=%s task=%s id=%s attempt=%d fence=%d seconds=%s%s",
            word,
            entry.queue,
            name or "-",
            claim.request_id,
            claim.attempt,
            claim.fence,
            "-" if seconds is None else f"{seconds:.3f}",
            tail,
        )

    def _attributes(self, job: Job) -> dict[str, Any]:
        claim = job.claim
        return {
            "ledger.queue": job.queue,
            "ledger.request_id": claim.request_id,
            "ledger.attempt": claim.attempt,
            "ledger.fence": claim.fence,
        }

    # -- stopping -------------------------------------------------------------------------

    def _release_unstarted(self) -> None:
        """Give back claims whose jobs never started: PENDING at once, attempt unspent."""
        by_queue: dict[str, list[_Entry]] = defaultdict(list)
        with self._lock:
            for entry in self._in_hand.values():
                if entry.started is None and not entry.finished:
                    entry.finished = True  # it will never start now
                    entry.job.cancelled.set()
                    by_queue[entry.queue].append(entry)
        for queue, unstarted in by_queue.items():
            try:
                answers = self.ledgers[queue].release(entry.job.claim for entry in unstarted)
            except LedgerError as exc:
                log.warning("worker %s: could not give back claims: %s", self.worker_id, exc)
                answers = []
            given = sum(1 for answer in answers if answer.status is SettlementStatus.SETTLED)
            with self._lock:
                for entry in unstarted:
                    self._drop(entry)
            log.info(
                "worker %s: gave back %d claim(s) of %s that never started",
                self.worker_id,
                given,
                queue,
            )

    # -- renewals, time-outs, heartbeats ------------------------------------------------

    def _renew_and_watch(self) -> None:
        with self._lock:
            entries = [entry for entry in self._in_hand.values() if not entry.finished]
        by_queue: dict[str, list[_Entry]] = defaultdict(list)
        for entry in entries:
            by_queue[entry.queue].append(entry)
        for queue, group in by_queue.items():
            items = []
            for entry in group:
                plan = entry.plan
                lease = plan.lease if plan is not None and plan.lease else entry.lease
                items.append((entry.job.claim, lease))
            try:
                answers = self.ledgers[queue].renew_many(items)
            except LedgerError as exc:  # Redis away: the leases may still hold; try next beat
                log.warning("worker %s: renewals of %s failed: %s", self.worker_id, queue, exc)
                continue
            for entry, answer in zip(group, answers, strict=True):
                if answer.status is SettlementStatus.LOST:
                    self._lose(entry, answer.reason)
        self._watch_timeouts(entries)
        try:
            self._beat()
        except redis_errors.RedisError as exc:  # a missed beat only delays the Workers page
            log.warning("worker %s: heartbeat not written: %s", self.worker_id, exc)

    def _lose(self, entry: _Entry, reason: str | None) -> None:
        if entry.job.lost.is_set():
            return
        entry.job.lost.set()
        log.warning(
            "worker %s: renewal of %s (queue %s, fence %d) answered LOST (%s)",
            self.worker_id,
            entry.job.claim.request_id,
            entry.queue,
            entry.job.claim.fence,
            reason,
        )
        with self._lock:
            unstarted = entry.started is None and not entry.finished
            if unstarted:  # it never starts now: nothing runs, nothing is settled
                entry.finished = True
                self._drop(entry)
        if unstarted:
            self.counts.lost += 1
            self.metrics.lost(entry.queue)

    def _watch_timeouts(self, entries: Iterable[_Entry]) -> None:
        now = time.monotonic()
        for entry in entries:
            plan = entry.plan
            if plan is None or plan.timeout is None or entry.started is None or entry.finished:
                continue
            if now - entry.started < plan.timeout:
                continue
            log.warning(
                "worker %s: %s (queue %s) ran past its time-out of %s s",
                self.worker_id,
                entry.job.claim.request_id,
                entry.queue,
                plan.timeout,
            )
            entry.job.cancelled.set()
            self._finish(entry, entry.handler.timed_out(entry.job, plan))
            if entry.async_future is not None:
                entry.async_future.cancel()
                continue
            if self.config.exit_on_timeout:
                self._hard_exit.set()  # settle it, then end the process: the work stops too
                self.request_stop()
                continue
            with self._lock:  # only while the thread still runs this very job
                if entry.thread_id is not None:
                    _interrupt(entry.thread_id)

    def _beat(self) -> None:
        heartbeats = self.config.heartbeats
        if heartbeats is None:
            return
        with self._lock:
            running = [
                {
                    "id": entry.job.claim.request_id,
                    "queue": entry.queue,
                    "name": entry.plan.name if entry.plan else "",
                    "attempt": entry.job.claim.attempt,
                    "since": entry.job.started_at,
                }
                for entry in self._in_hand.values()
                if entry.started is not None and not entry.finished
            ]
        info = WorkerInfo(
            worker_id=self.worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=list(self._queues),
            concurrency=self.config.concurrency,
            started_at=self._started_ms,
            beat_at=int(time.time() * 1000),
            processed=self.counts.processed,
            failed=self.counts.failed,
            retried=self.counts.retried,
            lost=self.counts.lost,
            running=running,
            state="stopping" if self.stopping else "running",
        )
        heartbeats.beat(info, ttl_s=max(3.0, min(self.leases.values())))

    # -- repair -------------------------------------------------------------------------

    def _repair(self) -> None:
        for queue in self._queues:
            ledger = self.ledgers[queue]
            report = ledger.repair_page(self._cursors[queue], self.config.repair_count)
            self._cursors[queue] = report.cursor
            counts = {name: value for name, value in report.counts().items() if value}
            counts.pop("scanned", None)
            if counts:
                log.info(
                    "repair queue=%s %s",
                    queue,
                    " ".join(f"{name}={value}" for name, value in sorted(counts.items())),
                )
            if report.cursor == "0":
                self.metrics.depth(queue, ledger.stats().pending)

    def _quietly(self, work: Callable[[], None]) -> None:
        try:
            work()
        except Exception as exc:
            log.debug("worker %s: %s", self.worker_id, exc)


class _TimedOut(BaseException):
    """Raised inside a job's thread that ran past its time-out (see ``_interrupt``)."""


def _interrupt(thread_id: int) -> None:
    """Raise ``_TimedOut`` in a thread at its next Python instruction.

    A thread blocked inside C code (a socket read without a time-out) is not reached
    until it returns to Python; its outcome is ignored either way. Use ``--processes``
    where a time-out must stop the work itself.
    """
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), ctypes.py_object(_TimedOut)
    )
