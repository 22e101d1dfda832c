"""One tick of the scheduler: read the state and the server clock, decide, admit.

For each schedule, a tick:

1. finishes the fires left pending: its own (a retry), and any other node's whose
   deadline has passed (that node died, or stalled, between deciding and admitting);
2. decides the fires due since ``through`` (``misfire.decide``) and commits the
   decision with a compare-and-set on ``through`` (``state.ScheduleStore.commit``), its
   fires pending; a node that loses the race leaves the schedule to the winner;
3. fires each decided fire in two steps: ``claim_dispatch`` records this node in the
   dispatch registry, then ``admit`` hands the fire to the ledger under the stable
   request id ``schedule:{key}:{epoch}``; then the pending entry goes.

A node that dies anywhere in step 3 leaves the fire pending, and the next tick of any
node after the deadline repeats both steps: the claim is already there (its node is
overwritten, status ``recovered``) and the admission, if it had landed, answers
``DUPLICATE``. So each fire is admitted once. Everything runs on the Redis server's
clock; no node's own clock is read.

On a Redis Cluster a schedule's queue, its fire's dispatch record and the state hash may
live on different masters. A schedule whose queue cannot be reached keeps its fire
pending and is reported ``unavailable``; the tick goes on with the others. The dispatch
registry is the record of who fired what, not the lock, so a fire whose record cannot be
written is admitted all the same (it is missing from the history). Only the state hash
is needed by every schedule: without it the tick raises ``LedgerUnavailable``.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final

from ..counters import Counters
from ..dispatch import DispatchRegistry, DispatchUnavailable
from ..errors import LedgerUnavailable
from ..results import AdmissionStatus
from .fires import Timing, datetime_of
from .misfire import MAX_FIRES, Misfire, decide
from .state import Pending, ScheduleStore, Snapshot

__all__ = [
    "FIRE_LEASE_MS",
    "Admit",
    "Fire",
    "FireEvent",
    "Outcome",
    "Schedule",
    "TickReport",
    "Ticker",
]

logger = logging.getLogger("django_ledger.scheduler")

#: How long a decided fire is its deciding node's to finish before others take it over.
FIRE_LEASE_MS: Final = 5_000


@dataclass(frozen=True)
class Fire:
    """One fire of one schedule: its key and its instant (epoch seconds, UTC)."""

    key: str
    epoch: int
    #: Triggered by an operator rather than due by the schedule.
    manual: bool = False

    @property
    def request_id(self) -> str:
        """The ledger request id: the same for every node, so admitted once."""
        if self.manual:
            return f"schedule:{self.key}:manual:{self.epoch}"
        return f"schedule:{self.key}:{self.epoch}"

    @property
    def at(self) -> datetime:
        return datetime_of(self.epoch)


#: Admit one fire as the task it names; answer the ledger's admission status.
Admit = Callable[[Fire], AdmissionStatus]


@dataclass(frozen=True)
class Schedule:
    """What the ticker needs of one schedule (the Django layer builds it from settings)."""

    key: str
    timing: Timing
    misfire: Misfire = Misfire.LATEST
    grace_ms: int = 3_600_000
    enabled: bool = True
    #: For a schedule stored at run time: the stored schedules' stamp it was read at.
    stamp: int | None = None


class Outcome(enum.Enum):
    ADMITTED = "admitted"  # the ledger stored it now
    DUPLICATE = "duplicate"  # it was there already: an earlier try, or another node
    DEFERRED = "deferred"  # not now (the queue is full): still pending, tried again
    REFUSED = "refused"  # never (the ledger rejected it): given up, dispatch "failed"

    def __str__(self) -> str:
        return self.value


_OUTCOMES: Final = {
    AdmissionStatus.ADMITTED: Outcome.ADMITTED,
    AdmissionStatus.DUPLICATE: Outcome.DUPLICATE,
    # The id is there with another payload (settings changed since it was admitted, or
    # it is quarantined): the fire is in the ledger once, which is what counts.
    AdmissionStatus.CONFLICT: Outcome.DUPLICATE,
    AdmissionStatus.FULL: Outcome.DEFERRED,
    AdmissionStatus.REJECTED: Outcome.REFUSED,
}


@dataclass(frozen=True)
class FireEvent:
    """What became of one fire in one tick."""

    fire: Fire
    outcome: Outcome
    status: AdmissionStatus
    #: Finished for another node, which decided the fire and did not admit it in time.
    recovered: bool = False


@dataclass
class TickReport:
    """What one tick did; counts are properties over ``events``."""

    now_ms: int
    node_id: str
    events: list[FireEvent] = field(default_factory=list)
    #: (key, first, last): missed fires the misfire policy left out.
    dropped: list[tuple[str, int, int]] = field(default_factory=list)
    #: (key, first, last): fires that came due while the schedule was paused or disabled.
    paused: list[tuple[str, int, int]] = field(default_factory=list)
    #: (key, message): schedules this tick could not handle (the others went on).
    errors: list[tuple[str, str]] = field(default_factory=list)
    #: (key, message): schedules whose queue Redis could not reach in this tick (a
    #: cluster master down); their fires stay pending, and the others went on.
    unavailable: list[tuple[str, str]] = field(default_factory=list)
    #: The soonest next fire of an active schedule (epoch seconds), for the loop's wait.
    next_due: int | None = None
    #: Some schedule has more due fires than one decision admits: tick again at once.
    more: bool = False
    #: Counts for the counters (``core/counters.py``): ``F:<key>`` fires admitted,
    #: ``S:<key>`` fires skipped (paused or disabled), ``M:<key>`` missed fires dropped.
    tallies: dict[str, int] = field(default_factory=dict)

    def tally(self, code: str, key: str, n: int = 1) -> None:
        if n > 0:
            name = f"{code}:{key}"
            self.tallies[name] = self.tallies.get(name, 0) + n

    def count(self, outcome: Outcome) -> int:
        return sum(1 for event in self.events if event.outcome is outcome)

    @property
    def admitted(self) -> int:
        return self.count(Outcome.ADMITTED)

    @property
    def duplicates(self) -> int:
        return self.count(Outcome.DUPLICATE)

    @property
    def recovered(self) -> int:
        return sum(1 for event in self.events if event.recovered)


class Ticker:
    """Run ticks for one node: its store, dispatch registry, admission and node id.

    ``after_claim`` is a test seam called between a fire's two steps (a crash test
    kills the process there).
    """

    def __init__(
        self,
        store: ScheduleStore,
        registry: DispatchRegistry,
        admit: Admit,
        node_id: str,
        *,
        limit: int = MAX_FIRES,
        after_claim: Callable[[Fire], None] | None = None,
        count: bool = True,
    ) -> None:
        if not isinstance(node_id, str) or not node_id.strip():
            raise ValueError(f"node_id must be a non-empty str, not {node_id!r}")
        self.store = store
        self.registry = registry
        self.admit = admit
        self.node_id = node_id
        self.limit = limit
        self.after_claim = after_claim
        #: Where each tick adds its fires, skips and misfires (one call, when any).
        self.counters = Counters(store.redis, store.namespace) if count else None

    def tick(
        self, schedules: Iterable[Schedule] | Callable[[Snapshot], Iterable[Schedule]]
    ) -> TickReport:
        """Run one tick over ``schedules`` (or what it returns for the tick's snapshot).

        Raise ``LedgerUnavailable`` when the schedules' state cannot be read, or when no
        schedule could reach Redis (what was decided stays pending for the next tick). A
        schedule whose own Redis cannot be reached while others' can (a cluster master
        down) is reported in ``unavailable``, any other error of one schedule in
        ``errors``; either way the others go on.
        """
        snapshot = self.store.snapshot()
        if callable(schedules):
            schedules = schedules(snapshot)
        report = TickReport(snapshot.now_ms, self.node_id)
        away: LedgerUnavailable | None = None
        reached = 0
        for schedule in schedules:
            try:
                self._tick_one(schedule, snapshot, report)
            except LedgerUnavailable as exc:
                logger.warning(
                    "schedule %r: Redis unavailable, its fires wait: %s", schedule.key, exc
                )
                report.unavailable.append((schedule.key, str(exc)))
                away = away or exc
                continue
            except Exception as exc:
                logger.exception("schedule %r: the tick failed", schedule.key)
                report.errors.append((schedule.key, f"{type(exc).__name__}: {exc}"))
            reached += 1
        if away is not None and not reached:
            raise away
        for event in report.events:
            if event.outcome is Outcome.ADMITTED:
                report.tally("F", event.fire.key)
        if self.counters is not None and report.tallies:
            try:
                self.counters.add_schedules(report.tallies)
            except Exception as exc:  # the counts are lost, never the tick
                logger.warning("the scheduler's counts were not written: %s", exc)
        return report

    # -- one schedule -------------------------------------------------------------------

    def _tick_one(self, schedule: Schedule, snapshot: Snapshot, report: TickReport) -> None:
        key, now_ms = schedule.key, snapshot.now_ms
        now = now_ms // 1000
        for epoch, entry in sorted(snapshot.pending.get(key, {}).items()):
            mine = entry.node == self.node_id
            if mine or entry.deadline_ms <= now_ms:
                report.events.append(self._fire(Fire(key, epoch), taken_over=not mine))
        if key in snapshot.corrupt:
            logger.error(
                "schedule %r: its state holds %r; starting it again from now",
                key,
                snapshot.corrupt[key],
            )
            self.store.set_through(key, now)
            return
        through = snapshot.through.get(key)
        if through is None:
            # Seen for the first time: its fires start after now, on every node.
            self.store.start(key, now)
            return
        active = schedule.enabled and key not in snapshot.paused
        decision = decide(
            schedule.timing, through, now_ms, schedule.misfire, schedule.grace_ms, self.limit
        )
        if active:
            following = schedule.timing.next_after(max(now, decision.through))
            if following is not None and (report.next_due is None or following < report.next_due):
                report.next_due = following
        if not decision.changes:
            return
        fires = decision.fires if active else ()
        pending = Pending(self.node_id, now_ms + FIRE_LEASE_MS)
        if not self.store.commit(key, through, decision.through, fires, pending, schedule.stamp):
            return  # another node decided first, from the same reading: its fires
        if decision.through < now:
            report.more = True
        if not active:
            if decision.fires:
                report.paused.append((key, decision.fires[0], decision.fires[-1]))
                report.tally("S", key, len(decision.fires))
            if decision.dropped is not None:  # what the policy left out was due too
                report.tally("S", key, _fires_between(schedule.timing, *decision.dropped))
            return
        if decision.dropped is not None:
            report.dropped.append((key, *decision.dropped))
            report.tally("M", key, _fires_between(schedule.timing, *decision.dropped))
            logger.warning(
                "schedule %r: missed fires %s to %s not run (MISFIRE %r)",
                key,
                datetime_of(decision.dropped[0]).isoformat(),
                datetime_of(decision.dropped[1]).isoformat(),
                str(schedule.misfire),
            )
        for epoch in fires:
            report.events.append(self._fire(Fire(key, epoch), taken_over=False))

    def _fire(self, fire: Fire, *, taken_over: bool) -> FireEvent:
        """Claim the dispatch, admit the fire, forget it as pending (in this order)."""
        try:
            won = self.registry.claim_dispatch(fire.key, fire.epoch, self.node_id)
        except DispatchUnavailable as exc:
            logger.warning(
                "fire %s: admitted without its dispatch record (%s)", fire.request_id, exc
            )
            won = True  # nobody else's record either: nothing to say of another node
        if self.after_claim is not None:
            self.after_claim(fire)
        status = self.admit(fire)
        outcome = _OUTCOMES[status]
        if outcome is Outcome.DEFERRED:
            logger.warning("fire %s: the queue is full; trying again next tick", fire.request_id)
            return FireEvent(fire, outcome, status)
        if outcome is Outcome.REFUSED:
            logger.error("fire %s: the ledger refused it (%s); giving up", fire.request_id, status)
            self._record(fire, "failed")
        elif taken_over:
            logger.warning("fire %s: finished for the node that decided it", fire.request_id)
            self._record(fire, "recovered")
        elif not won:
            logger.info("fire %s: another node holds its dispatch record", fire.request_id)
        self.store.finish(fire.key, fire.epoch)
        return FireEvent(fire, outcome, status, recovered=taken_over)

    def _record(self, fire: Fire, status: str) -> None:
        """Write the fire's dispatch record with ``status``; a registry away only loses it."""
        try:
            self.registry.log_dispatch(fire.key, fire.epoch, self.node_id, status)
        except DispatchUnavailable as exc:
            logger.warning(
                "fire %s: dispatch record %r not written (%s)", fire.request_id, status, exc
            )


#: Most missed fires one misfire counts (a long outage of a frequent schedule).
MAX_COUNTED_MISSES: Final = 10_000


def _fires_between(timing: Timing, first: int, last: int) -> int:
    """How many fires ``timing`` has from ``first`` to ``last`` (both fires), bounded."""
    n, at = 1, first
    while n < MAX_COUNTED_MISSES:
        following = timing.next_after(at)
        if following is None or following > last:
            break
        n, at = n + 1, following
    return n
