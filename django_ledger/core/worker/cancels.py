"""Hearing a running job's cancel at once: a blocking read of the queues' cancels streams.

``Ledger.cancel`` of a CLAIMED record ends it FAILED under a new fence and, in the same
script, adds an entry to the queue's ``cancels`` stream naming the run: its id, its
worker (``owner``) and its claim's fence, with who cancelled it, when and why
(``lua/scripts/cancel.lua``). While this worker runs jobs, one thread per group of
streams (one client; on a cluster, one slot) reads them with ``XREAD BLOCK`` (one call
per block, at most a second, or per cancel), so the worker hears a cancel within a
round trip of it, not at its next renewal a third of a lease later. An idle worker
sends nothing for it: the thread waits on ``WorkerState.running``, which a job's start
sets, and reads only while a job runs.

A cancel heard for a job in hand (same id, worker and fence):

- not started yet (a prefetched claim): dropped, it never starts;
- a coroutine: cancelled at its next ``await``, its outcome decided here (refused when
  settled: the record has ended under a larger fence);
- a function: ``Job.cancel`` says so (a Django task's ``context.cancelled``); it stops when
  it checks. With ``WorkerConfig.cancel_grace`` (``ledger_worker --processes --cancel-grace``),
  one still running after the grace stops the process at once (exit 3), as a time-out
  does; its parent starts another in its place, and the other claims the process held go
  back (unstarted ones at once, running ones when their leases end).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ..records import State
from ..transport import text_of
from ..wake import block_for, slot_groups
from .handler import CancelNotice, Outcome
from .state import Entry, WorkerState

__all__ = ["CancelListener", "cancelled_outcome"]

log = logging.getLogger("django_ledger.worker")

#: How far (ms) before the earliest running claim a read starts, the first time: clocks
#: of one server, so a margin for nothing but a stream id taken a little earlier.
MARGIN_MS = 1000

#: Entries one read takes at most (the rest come with the next read, at once).
COUNT = 100
#: Seconds a read that found nothing leaves its connection to others (see ``_serve``).
HAND_BACK = 0.002

#: How long (s) a cancel of this worker's run that is not in hand yet is kept, to be
#: matched once the claim that brought it is taken in hand (a cancel can land between the
#: claim's reply and its entry).
KEEP_UNMATCHED = 10.0


def cancelled_outcome() -> Outcome:
    """The outcome of a run its worker gave up for a cancel: refused when settled."""
    return Outcome(State.FAILED, reason="cancelled")


@dataclass
class _Group:
    """Streams one ``XREAD`` can take: one client's, and on a cluster one slot's."""

    client: Any
    block: float
    streams: dict[str, str] = field(default_factory=dict)  # key -> queue
    last: dict[str, str] = field(default_factory=dict)  # key -> the last id read


class CancelListener:
    """Read the cancels streams while jobs run; tell the jobs cancelled (see the module)."""

    def __init__(self, state: WorkerState) -> None:
        self._state = state
        keys = {queue: ledger.cancel_keys() for queue, ledger in state.ledgers.items()}
        most = min(1.0, state.config.wake_block)
        self._groups = [
            _Group(client, block_for(client, most), streams)
            for client, streams in slot_groups(keys)
        ]
        self._grace = state.config.cancel_grace
        #: Cancelled jobs still running, with when their grace ends (``time.monotonic``).
        self._graced: dict[int, tuple[Entry, float]] = {}
        #: Cancels of this worker's runs not in hand when read, until when they are kept.
        self._unmatched: dict[tuple[str, str, int], tuple[CancelNotice, float]] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start one thread per group, joined when the worker returns (a read ends within a
        second), so its connection is back in the pool by then."""
        for n, group in enumerate(self._groups):
            self._state.spawn(f"ledger-cancels-{n}", partial(self._serve, group))

    def _running(self) -> list[Entry]:
        with self._state.lock:
            return [e for e in self._state.in_hand.values() if not e.finished]

    def _serve(self, group: _Group) -> None:
        """One thread's loop: wait for a job to run, then read while any is in hand."""
        state = self._state
        while not state.done.is_set():
            entries = self._running()
            if not entries:
                state.running.clear()
                if not self._running():  # a start between the look and the clear sets it
                    state.running.wait(1.0)  # no Redis: a local wait, ended by a start
                continue
            self._from(group, entries)
            wait = group.block
            with self._lock:
                if self._graced:
                    soonest = min(deadline for _, deadline in self._graced.values())
                    wait = max(0.001, min(wait, soonest - time.monotonic()))
            try:
                reply = group.client.xread(group.last, count=COUNT, block=int(wait * 1000))
            except Exception as exc:  # Redis away: the renewals find the cancel (LOST)
                log.debug("cancels not read: %s", exc)
                state.done.wait(wait)
                continue
            for key, items in _streams(reply):
                queue = group.streams.get(key)
                if queue is None:
                    continue
                for stream_id, fields in items:
                    group.last[key] = stream_id
                    self._entry(queue, fields)
            self._match_kept()
            self._end_graces()
            if not reply:
                # A read that timed out hands its connection back for a moment: a thread
                # waiting on a small pool (the renewer, the repairer) gets it first.
                state.done.wait(HAND_BACK)

    def _from(self, group: _Group, entries: list[Entry]) -> None:
        """Where a read starts when it has none yet: just before the earliest claim in hand.

        A cancel comes after the claim it cancels, so none is missed; entries of other
        runs read meanwhile are skipped (another id, worker or fence).
        """
        missing = [key for key in group.streams if key not in group.last]
        if not missing:
            return
        earliest = min(entry.job.started_at for entry in entries)
        for key in missing:
            group.last[key] = f"{max(0, earliest - MARGIN_MS)}-0"

    def _entry(self, queue: str, fields: Mapping[Any, Any]) -> None:
        """One stream entry: the cancel of a run in hand, or of another's (skipped)."""
        text = {text_of(k): text_of(v) for k, v in fields.items()}
        if text.get("owner") != self._state.worker_id:
            return
        try:
            key = (queue, text["id"], int(text["fence"]))
            notice = CancelNotice(
                text.get("by", ""), int(text.get("at", "0")), text.get("reason", "")
            )
        except (KeyError, ValueError):
            return
        with self._state.lock:
            entry = self._state.in_hand.get(key)
        if entry is not None:
            self.heard(entry, notice)
        else:
            with self._lock:
                self._unmatched[key] = (notice, time.monotonic() + KEEP_UNMATCHED)

    def _match_kept(self) -> None:
        """Tell the runs taken in hand since their cancel was read; forget the old ones."""
        if not self._unmatched:
            return
        now = time.monotonic()
        found = []
        with self._lock, self._state.lock:
            for key, (notice, until) in list(self._unmatched.items()):
                entry = self._state.in_hand.get(key)
                if entry is not None or until <= now:
                    del self._unmatched[key]
                if entry is not None:
                    found.append((entry, notice))
        for entry, notice in found:
            self.heard(entry, notice)

    def heard(self, entry: Entry, notice: CancelNotice) -> None:
        """Tell ``entry``'s run it is cancelled (see the module for what each kind does)."""
        state, job = self._state, entry.job
        if job.cancel is not None:
            return
        job.cancel = notice
        claim = job.claim
        with state.lock:
            unstarted = entry.started is None and not entry.finished
            if unstarted:  # it never starts now; its record has ended
                entry.finished = True
                job.cancelled.set()
                state.drop(entry)
            future = entry.async_future
        log.info(
            "worker %s: %s (queue %s, fence %d) was cancelled by %s: %s",
            state.worker_id,
            claim.request_id,
            entry.queue,
            claim.fence,
            notice.by or "-",
            "dropped before it started"
            if unstarted
            else "its coroutine is cancelled"
            if future is not None
            else "the task is told to stop",
        )
        if unstarted:
            state.wake.set()  # room for another claim
            return
        if future is not None and not job.cancelled.is_set():
            job.cancelled.set()  # the run's own CancelledError handlers let it through
            state.finish(entry, cancelled_outcome())
            future.cancel()
            return
        if self._grace is not None and future is None:
            with self._lock:
                self._graced[id(entry)] = (entry, time.monotonic() + self._grace)

    def _end_graces(self) -> None:
        """Stop the process for a cancelled run still going after its grace (see the module)."""
        now = time.monotonic()
        with self._lock:
            due = [entry for entry, deadline in self._graced.values() if deadline <= now]
            for entry in due:
                del self._graced[id(entry)]
            self._graced = {k: v for k, v in self._graced.items() if not v[0].finished}
        state = self._state
        for entry in due:
            if entry.finished:
                continue
            log.warning(
                "worker %s: %s (queue %s) still runs %s s after its cancel: stopping this "
                "process; another takes its place",
                state.worker_id,
                entry.job.claim.request_id,
                entry.queue,
                f"{self._grace:g}",
            )
            entry.job.cancelled.set()
            state.finish(entry, cancelled_outcome())
            state.hard_exit.set()  # settle what finished, give back the rest, end: exit 3
            state.request_stop()


def _streams(reply: Any) -> list[tuple[str, list[tuple[str, Mapping[Any, Any]]]]]:
    """An ``XREAD`` reply as (key, [(id, fields)]) pairs: RESP2's list or RESP3's map."""
    if not reply:
        return []
    pairs = reply.items() if isinstance(reply, dict) else reply
    out = []
    for key, items in pairs:
        if isinstance(items, list) and len(items) == 1 and isinstance(items[0], list):
            items = items[0]  # RESP3 wraps the entries once more
        out.append((text_of(key), [(text_of(i), f or {}) for i, f in items]))
    return out
