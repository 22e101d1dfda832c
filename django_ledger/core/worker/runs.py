"""Running claimed jobs: on the main loop's thread, on a pool thread, or on the event loop.

Whichever runs a job, its outcome takes one way out: ``WorkerState.finish``, which puts
it in the outbox the main loop settles from.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections import deque
from collections.abc import Awaitable
from concurrent.futures import CancelledError

from ..errors import LedgerError
from ..records import State
from ..results import SettlementStatus
from . import tracing
from .cancels import cancelled_outcome
from .handler import Outcome, Plan
from .interrupt import TimedOut
from .outcomes import handler_bug, tell_started, trace_attributes
from .pool import JobThreads
from .state import Entry, WorkerState

__all__ = ["Runs"]

log = logging.getLogger("django_ledger.worker")


class Runs:
    """Start the jobs of the claims a worker holds, ``concurrency`` at a time."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state
        self._pool: JobThreads[Entry] = JobThreads(
            state.config.concurrency, self._execute_pooled, "ledger-job"
        )
        #: With concurrency 1: claims waiting for the main loop to run them (or hand them
        #: to the pool's one thread); ``None`` otherwise, where the pool's queue holds them.
        self.backlog: deque[Entry] | None = deque() if state.config.concurrency == 1 else None
        #: Jobs handed to the pool whose thread has not finished them (with a backlog only).
        self._queued = 0
        #: The job the main loop runs itself, if any (for ``run``'s stop deadline).
        self.running_here: Entry | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def submit(self, entries: list[Entry]) -> None:
        """Queue new claims' jobs: for the pool's threads, or the main loop's backlog."""
        if self.backlog is not None:
            self.backlog.extend(entries)
            return
        for entry in entries:
            self._pool.submit(entry)

    def shutdown(self, wait: bool) -> None:
        """Stop the pool (waiting for its threads, unless the stop was forced) and the loop."""
        self._pool.shutdown(wait=wait)
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)

    def run_next(self) -> None:
        """With concurrency 1: start the next claim in the backlog, if the pool is idle.

        A job with no time-out to watch and no coroutine runs right here, on the main
        loop's thread: no hand-off to a thread and back, and its outcome goes out with the
        next call, which also claims its successor. The others go to the pool's thread
        (a time-out interrupts that thread, not the loop); one job runs at a time.
        """
        assert self.backlog is not None
        while self.backlog and not self._queued:
            entry = self.backlog.popleft()
            if entry.finished:  # given back or lost before it started
                continue
            plan = self._plan(entry)
            if plan is None:  # refused: settled with the next call
                continue
            if plan.timeout is None and not plan.is_async:
                self.running_here = entry
                self._state.loop_busy = True
                try:
                    self._execute(entry)
                finally:
                    self._state.loop_busy = False
                    self.running_here = None
            else:
                with self._state.lock:
                    self._queued += 1
                self._pool.submit(entry)
            return

    def _execute_pooled(self, entry: Entry) -> None:
        """Run one job on a pool thread."""
        try:
            self._execute(entry)
        except TimedOut:
            pass  # meant for the run this thread had just ended, settled as timed out
        finally:
            if self.backlog is not None:
                with self._state.lock:
                    self._queued -= 1
                self._state.wake.set()  # the main loop may start the next one now

    def _execute(self, entry: Entry) -> None:
        """Run one job on this thread (its outcome goes to the main loop's outbox)."""
        state = self._state
        if (
            not entry.finished
            and entry.may_lapse(time.monotonic())
            and not self._renewed_before_start(entry)
        ):
            return
        with state.lock:
            if entry.finished:  # given back or lost before it started
                return
            if not state.may_start():  # recycling: the main loop gives it back
                state.wake.set()
                return
            entry.thread_id = threading.get_ident()
            entry.started = time.monotonic()
        state.running.set()
        if entry.job.claim.held:  # prefetched: the main loop's next call marks it started
            state.wake.set()
        if state.config.started is not None:
            tell_started(state, entry, state.config.started)
        try:
            self._execute_started(entry)
        except TimedOut:
            # Meant for this job (already settled as timed out), or, if the thread had just
            # moved on, for the one before: this job is then given back to run again.
            state.finish(entry, Outcome(State.PENDING, reason="interrupted"))
        finally:
            with state.lock:
                entry.thread_id = None

    def _renewed_before_start(self, entry: Entry) -> bool:
        """Renew a claim whose lease may have ended before its job starts; say if it holds.

        This worker was paused, or cut off from Redis, for most of a lease: meanwhile the
        lease may have ended and repair given the claim back (a held claim without
        spending its attempt), so another worker may run it under the same attempt
        number. A claim the renewal does not confirm is dropped unstarted: its lease
        ends, and repair hands it out again.
        """
        state = self._state
        claim = entry.job.claim
        sent = time.monotonic()
        try:
            answer = state.ledgers[entry.queue].renew_many([(claim, entry.lease_for)])[0]
        except LedgerError as exc:
            why = f"could not be renewed: {exc}"
        else:
            if answer.status is SettlementStatus.RENEWED:
                entry.confirmed(sent, entry.lease_for)
                return True
            why = f"renewal answered LOST ({answer.reason})"
        entry.job.lost.set()
        if state.lose_unstarted(entry):
            log.warning(
                "worker %s: %s (queue %s, fence %d) not started: its lease may have ended "
                "before it could start, and its %s",
                state.worker_id,
                claim.request_id,
                entry.queue,
                claim.fence,
                why,
            )
        state.wake.set()  # room for another claim
        return False

    def _plan(self, entry: Entry) -> Plan | None:
        """Ask the handler how to run the job; one it cannot run is finished here."""
        job = entry.job
        try:
            plan = entry.handler.plan(job)
        except TimedOut:
            raise
        except BaseException as exc:  # a module that exits at import, too: refused, not fatal
            log.exception(
                "worker %s: job %s cannot be run", self._state.worker_id, job.claim.request_id
            )
            # A handler may say how a job it cannot run settles (with its reason stored).
            refused = getattr(entry.handler, "refused", None)
            outcome = refused(job, exc) if callable(refused) else None
            if not isinstance(outcome, Outcome):
                outcome = Outcome(State.FAILED, reason=f"unrunnable: {exc}")
            self._state.finish(entry, outcome)
            return None
        entry.plan = plan
        return plan

    def _execute_started(self, entry: Entry) -> None:
        state = self._state
        job = entry.job
        plan = entry.plan if entry.plan is not None else self._plan(entry)
        if plan is None:
            return
        name = plan.name or entry.queue
        try:
            if plan.is_async or not tracing.enabled():
                result = entry.handler.run(job, plan)
            else:
                with tracing.span(name, job.claim.traceparent, trace_attributes(job)) as traced:
                    result = entry.handler.run(job, plan)
                    if isinstance(result, Outcome):
                        traced.outcome(result)
            if isinstance(result, Outcome):
                state.finish(entry, result)
                return
        except TimedOut:
            raise
        except BaseException as exc:  # SystemExit, KeyboardInterrupt...: this job's, not ours
            state.finish(entry, handler_bug(state.worker_id, entry, exc))
            return
        self._await(entry, result)

    def _await(self, entry: Entry, awaitable: Awaitable[Outcome]) -> None:
        state = self._state
        job, name = entry.job, (entry.plan.name if entry.plan else "") or entry.queue

        async def wrapped() -> Outcome:
            with tracing.span(name, job.claim.traceparent, trace_attributes(job)) as traced:
                try:
                    outcome = await awaitable
                except Exception:
                    raise  # the done callback retries it as a handler's bug
                except BaseException as exc:  # KeyboardInterrupt, SystemExit would stop the loop
                    if isinstance(exc, asyncio.CancelledError) and job.cancelled.is_set():
                        raise  # the worker's time-out: settled already
                    outcome = handler_bug(state.worker_id, entry, exc)
                traced.outcome(outcome)
                return outcome

        future = asyncio.run_coroutine_threadsafe(wrapped(), self._event_loop())
        entry.async_future = future
        if job.cancel is not None and not job.cancelled.is_set():  # heard before it was set
            job.cancelled.set()
            state.finish(entry, cancelled_outcome())
            future.cancel()

        def done(future: concurrent.futures.Future[Outcome]) -> None:
            if future.cancelled():  # by its time-out (settled already), or else a bug
                if not entry.finished:
                    state.finish(entry, handler_bug(state.worker_id, entry, CancelledError()))
                return
            error = future.exception()
            if error is not None:
                state.finish(entry, handler_bug(state.worker_id, entry, error))
            else:
                state.finish(entry, future.result())

        future.add_done_callback(done)

    def _event_loop(self) -> asyncio.AbstractEventLoop:
        """The event loop coroutine jobs share, started with the first of them."""
        with self._state.lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                self._state.spawn("ledger-loop", lambda: self._serve_loop(loop))
                self._loop = loop
            return self._loop

    def _serve_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Run the loop until ``shutdown`` stops it; whatever escapes a callback, go on."""
        while True:
            try:
                loop.run_forever()
                return  # stopped
            except BaseException:
                log.exception("worker %s: the event loop raised", self._state.worker_id)
                if self._state.done.is_set():
                    return
