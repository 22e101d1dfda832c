"""The threads beside the main loop: the renewer (leases, time-outs, heartbeats), the repairer.

Each runs its work on a period until the worker is done; a failure of one beat is logged
and the next beat tries again, so neither thread ever dies of it. The repairer's thread
has rooms beside repair: ``Room`` objects the worker's builder hands in
(``WorkerConfig.rooms``; the Django face's outbox relay is one), each beaten on its own
period between repair pages, so no room needs a thread of its own.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections import defaultdict
from collections.abc import Callable, Iterable

import redis.exceptions as redis_errors

from ..errors import LedgerError, LedgerUnavailable
from ..results import Claim, RepairReport, Settlement, SettlementStatus
from .heartbeat import WorkerInfo
from .interrupt import interrupt
from .rooms import Room
from .state import Entry, WorkerState

__all__ = ["Renewer", "Repairer", "Room"]

log = logging.getLogger("django_ledger.worker")


def _guarded(state: WorkerState, name: str, work: Callable[[], object]) -> object:
    """Do ``work``; log a failure (``None`` then) instead of letting it end the thread."""
    try:
        return work()
    except LedgerUnavailable as exc:
        log.warning("worker %s: Redis unavailable: %s", state.worker_id, exc)
    except Exception:  # a bug here must not stop the worker: say it and go on
        log.exception("worker %s: %s failed", state.worker_id, name)
    return None


class Renewer:
    """Renew every claim in hand, end runs past their time-out, and write the heartbeat."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state
        self._started_ms = int(time.time() * 1000)

    def run(self) -> None:
        """The renewer thread's body: a beat every period, asked afresh each time, until done."""
        while not self._state.done.wait(self._period()):
            _guarded(self._state, "_renew_and_watch", self._renew_and_watch)

    def _period(self) -> float:
        """A third of the shortest lease in hand: a task's own (``Plan.lease``) or a queue's."""
        state = self._state
        now = time.monotonic()
        with state.lock:
            entries = list(state.in_hand.values())
        own = [e.plan.lease for e in entries if e.plan and e.plan.lease]
        period = min([*state.leases.values(), *own]) / 3
        # Wake in time for the earliest time-out too, not a beat late.
        for e in entries:
            if e.plan and e.plan.timeout and e.started is not None and not e.finished:
                period = min(period, e.plan.timeout - (now - e.started))
        return max(0.05, period)

    def _renew_and_watch(self) -> None:
        state = self._state
        with state.lock:
            entries = [entry for entry in state.in_hand.values() if not entry.finished]
        by_queue: dict[str, list[Entry]] = defaultdict(list)
        for entry in entries:
            by_queue[entry.queue].append(entry)
        for queue, group in by_queue.items():
            items: list[tuple[Claim, float, bool]] = []
            for entry in group:
                plan = entry.plan
                lease = plan.lease if plan is not None and plan.lease else entry.lease
                claim = entry.job.claim
                # A held claim whose job has started is marked started by this renewal.
                items.append((claim, lease, claim.held and entry.started is not None))
            sent = time.monotonic()
            try:
                answers = state.ledgers[queue].renew_many(items)
            except LedgerError as exc:  # Redis away: the leases may still hold; try next beat
                log.warning("worker %s: renewals of %s failed: %s", state.worker_id, queue, exc)
                state.contact.after(exc)
                continue
            self.took(group, [lease for _, lease, _ in items], answers, sent)
        self._watch_timeouts(entries)
        try:
            self.beat()
        except redis_errors.RedisError as exc:  # a missed beat only delays the Workers page
            log.warning("worker %s: heartbeat not written: %s", state.worker_id, exc)
            state.contact.after(exc)

    def took(
        self, entries: list[Entry], leases: list[float], answers: list[Settlement], sent: float
    ) -> None:
        """Take in the answers to renewals or start marks sent at ``sent``: each renewed
        the lease, or found it lost.

        A start mark answered LOST (the lease ended while this worker was paused, and
        repair gave the claim back) loses the job: one that has not started never does.
        """
        for entry, lease, answer in zip(entries, leases, answers, strict=True):
            if answer.status is SettlementStatus.LOST:
                self.lose(entry, answer.reason)
            else:
                entry.confirmed(sent, lease)

    def lose(self, entry: Entry, reason: str | None) -> None:
        """A renewal (or a start mark) of ``entry`` answered LOST: its outcome is not written."""
        state = self._state
        if entry.job.lost.is_set():
            return
        entry.job.lost.set()
        log.warning(
            "worker %s: renewal of %s (queue %s, fence %d) answered LOST (%s)",
            state.worker_id,
            entry.job.claim.request_id,
            entry.queue,
            entry.job.claim.fence,
            reason,
        )
        state.lose_unstarted(entry)

    def _watch_timeouts(self, entries: Iterable[Entry]) -> None:
        state = self._state
        now = time.monotonic()
        for entry in entries:
            plan = entry.plan
            if plan is None or plan.timeout is None or entry.started is None or entry.finished:
                continue
            if now - entry.started < plan.timeout:
                continue
            log.warning(
                "worker %s: %s (queue %s) ran past its time-out of %s s",
                state.worker_id,
                entry.job.claim.request_id,
                entry.queue,
                plan.timeout,
            )
            entry.job.cancelled.set()
            state.finish(entry, entry.handler.timed_out(entry.job, plan))
            if entry.async_future is not None:
                entry.async_future.cancel()
                continue
            if state.config.exit_on_timeout:
                state.hard_exit.set()  # settle it, then end the process: the work stops too
                state.request_stop()
                continue
            with state.lock:  # only while the thread still runs this very job
                if entry.thread_id is not None:
                    interrupt(entry.thread_id)

    def beat(self) -> None:
        """Write this worker's heartbeat (what runs, the counts), if it has heartbeats."""
        state = self._state
        heartbeats = state.config.heartbeats
        if heartbeats is None:
            return
        with state.lock:
            running = [
                {
                    "id": entry.job.claim.request_id,
                    "queue": entry.queue,
                    "name": entry.plan.name if entry.plan else "",
                    "attempt": entry.job.claim.attempt,
                    "since": entry.job.started_at,
                }
                for entry in state.in_hand.values()
                if entry.started is not None and not entry.finished
            ]
        info = WorkerInfo(
            worker_id=state.worker_id,
            host=socket.gethostname(),
            pid=os.getpid(),
            queues=list(state.queues),
            concurrency=state.config.concurrency,
            started_at=self._started_ms,
            beat_at=int(time.time() * 1000),
            loop_at=int((time.time() if state.loop_busy else state.loop_at) * 1000),
            processed=state.counts.processed,
            failed=state.counts.failed,
            retried=state.counts.retried,
            lost=state.counts.lost,
            running=running,
            state="stopping" if state.stopping.is_set() else "running",
            data_losses=heartbeats.watch.losses,
            data_lost_at=None
            if heartbeats.watch.last is None
            else heartbeats.watch.last.noticed_at,
        )
        loss = heartbeats.beat(info, ttl_s=max(3.0, min(state.leases.values())))
        state.contact.answered()
        if loss is not None:
            state.metrics.data_lost()
            log.error(
                "worker %s: Redis lost the ledger's data (namespace %s; noticed by %s): "
                "records, results and heartbeats written before are gone, and the tasks this "
                "worker holds will be refused; re-send what must run (enqueue_once, the outbox "
                "relay). Fences go on above every earlier one. Check Redis persistence "
                "(manage.py check --deploy).",
                state.worker_id,
                heartbeats.namespace,
                loss.noticed_by,
            )


class Repairer:
    """Run repair pages of every queue, so what dead workers left comes back soon.

    A queue at rest (``Stats.at_rest``) gets its sweep alone, between passes, while this
    worker claims nothing: an idle worker's upkeep then costs a few commands per queue
    and interval, not a pass over every record it keeps.

    Its thread also beats the rooms of ``WorkerConfig.rooms`` (``Room``), each when due;
    with ``repair`` off (``--no-repair``) it beats the rooms alone.
    """

    def __init__(self, state: WorkerState) -> None:
        self._state = state
        interval = state.config.repair_interval
        if interval is None:
            interval = max(0.5, min(5.0, min(state.leases.values()) / 6))
        self._interval = interval
        self._cursors = dict.fromkeys(state.queues, "0")
        #: The worker's claims at the last round of pages (-1: none yet, so the first
        #: round starts a pass wherever one is due).
        self._claimed = -1
        self.rooms: list[Room] = list(state.config.rooms)

    def run(self) -> None:
        """The repairer thread's body: repair pages and room beats, each on its period."""
        state = self._state
        repairing = state.config.repair
        now = time.monotonic()
        next_repair = now + self._interval if repairing else float("inf")
        next_beat = [now] * len(self.rooms)  # a room's first beat comes at once
        try:
            while True:
                due = min([next_repair, *next_beat])
                timeout = None if due == float("inf") else max(0.0, due - time.monotonic())
                if state.done.wait(timeout):
                    return
                now = time.monotonic()
                if now >= next_repair:
                    _guarded(state, "repair", self._repair)
                    next_repair = time.monotonic() + self._interval
                for index, room in enumerate(self.rooms):
                    if now >= next_beat[index] and not state.done.is_set():
                        wait = _guarded(state, room.name, room.beat)
                        pause = wait if isinstance(wait, int | float) else self._interval
                        next_beat[index] = time.monotonic() + max(0.0, pause)
        finally:
            for room in self.rooms:
                _guarded(state, f"{room.name} close", room.close)

    def _repair(self) -> None:
        state = self._state
        # Whether this worker claimed nothing since the last round of pages.
        idle, self._claimed = state.counts.claimed == self._claimed, state.counts.claimed
        for queue in state.queues:
            ledger = state.ledgers[queue]
            if idle and self._cursors[queue] == "0":
                # Between passes, idle: a queue at rest (nothing to run, every record where
                # its indexes say) starts no pass; its sweep still purges past retention.
                stats = ledger.stats()
                if stats.at_rest:
                    state.metrics.depth(queue, stats.pending)
                    self._noted(queue, ledger.sweep(state.config.repair_count))
                    continue
            report = ledger.repair_page(self._cursors[queue], state.config.repair_count)
            self._cursors[queue] = report.cursor
            self._noted(queue, report)
            if report.cursor == "0":
                state.metrics.depth(queue, ledger.stats().pending)

    def sweep(self) -> int:
        """Repair every queue's expired leases and ended records now, from the indexes.

        What a ``--burst`` run does before it decides nothing is due: a sweep per queue
        until one finds nothing more. Returns how many expired leases it gave back or
        ended (their records are due again, or DEAD).
        """
        state = self._state
        if not state.config.repair:
            return 0
        count = state.config.repair_count
        returned = 0
        for queue in state.queues:
            for _ in range(100):  # bounded: every full sweep moved records on
                report = state.ledgers[queue].sweep(count)
                self._noted(queue, report, "burst ")
                returned += report.expired + report.dead
                if report.expired + report.dead + report.purged < count:
                    break
        return returned

    def _noted(self, queue: str, report: RepairReport, what: str = "") -> None:
        """Log what a repair did, and add it to the worker's ``repaired`` totals."""
        state = self._state
        with state.lock:
            state.repaired.add(report)
        heartbeats = state.config.heartbeats
        if heartbeats is not None:
            for _ in range(report.dead):  # the repairer ended it: no task name at hand here
                heartbeats.tally.add(queue, "", "dead")
        counts = {name: value for name, value in report.counts().items() if value}
        counts.pop("scanned", None)
        if counts:
            log.info(
                "%srepair queue=%s %s",
                what,
                queue,
                " ".join(f"{name}={value}" for name, value in sorted(counts.items())),
            )
