"""A worker's stop: give back what never started, give the rest a grace, then leave them.

``Stop`` keeps the promises of a stop asked for (``WorkerState.request_stop``) whoever
notices it first: the main loop between two calls, or ``Worker.run`` while the main
loop is inside a job it runs itself.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable

from ..errors import LedgerError
from ..results import SettlementStatus
from .state import Entry, WorkerState

__all__ = ["Stop"]

log = logging.getLogger("django_ledger.worker")


class Stop:
    """One worker's stop: its deadline, and whether it left jobs running."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state
        #: When a stop asked for runs out of time (set once, by ``begin``).
        self._deadline: float | None = None
        #: Set when a stop left jobs running past ``shutdown_timeout`` (their leases
        #: bring them back): the process must exit without joining their threads.
        self.abandoned = False

    def begin(self) -> float:
        """Give back what never started (said once per stop); return the stop's deadline.

        Called by the main loop, or by ``run`` while the loop runs a job itself; again on
        later rounds for claims a call still in flight at the stop brought in.
        """
        state = self._state
        with state.lock:
            first = self._deadline is None
            if first:
                grace = 0.0 if state.hard_exit.is_set() else state.config.shutdown_timeout
                self._deadline = time.monotonic() + grace
            deadline = self._deadline
        assert deadline is not None
        self.release_unstarted()
        if first:
            log.info(
                "worker %s stopping: %d task(s) running get up to %.0f s to finish; "
                "a second signal stops at once",
                state.worker_id,
                state.in_hand_count(),
                state.config.shutdown_timeout,
            )
        return deadline

    def abandon(self) -> None:
        """Leave the jobs still running to their leases: the grace is over."""
        log.warning(
            "worker %s: %d job(s) still running after %.1f s: leaving them to their leases",
            self._state.worker_id,
            self._state.in_hand_count(),
            self._state.config.shutdown_timeout,
        )
        self.abandoned = True

    def release_unstarted(self) -> None:
        """Give back claims whose jobs never started: PENDING at once, attempt unspent."""
        state = self._state
        by_queue: dict[str, list[Entry]] = defaultdict(list)
        with state.lock:
            for entry in state.in_hand.values():
                if entry.started is None and not entry.finished:
                    entry.finished = True  # it will never start now
                    entry.job.cancelled.set()
                    by_queue[entry.queue].append(entry)
        for queue, unstarted in by_queue.items():
            try:
                answers = state.ledgers[queue].release(entry.job.claim for entry in unstarted)
            except LedgerError as exc:
                log.warning("worker %s: could not give back claims: %s", state.worker_id, exc)
                answers = []
            given = sum(1 for answer in answers if answer.status is SettlementStatus.SETTLED)
            with state.lock:
                for entry in unstarted:
                    state.drop(entry)
            log.info(
                "worker %s: gave back %d claim(s) of %s that never started",
                state.worker_id,
                given,
                queue,
            )

    def supervise(
        self,
        loop: threading.Thread,
        running_here: Callable[[], bool],
        nudge: Callable[[], None] = lambda: None,
    ) -> None:
        """Wait for the main loop to end; while it runs a job itself, keep the stop's promises.

        The loop cannot give back prefetched claims, or give up on its job once the grace
        is over (at once on a second signal), while it is inside that job: this does.
        ``running_here`` says whether the loop is inside a job now; ``nudge`` ends the
        loop's own block on the wake keys (``Waker.nudge``), at each signal.
        """
        state = self._state
        nudged = (False, False)  # for the stop, and for the second signal
        while True:
            loop.join(0.1)  # a wait with a time-out: signals are handled meanwhile
            if not loop.is_alive():
                return
            asked = (state.stopping.is_set(), state.forced.is_set())
            if asked != nudged and any(asked):
                nudged = asked
                nudge()
            if not state.stopping.is_set() or not running_here():
                continue
            deadline = self.begin()
            if state.forced.is_set():
                return
            if time.monotonic() >= deadline and running_here():
                self.abandon()
                return
