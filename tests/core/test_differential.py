"""The optimized and the reference ledger, driven with the same random operations.

Both queues live on the same Redis. After every step each identity must stand the
same in both: state, attempts, fence, owner, payload, traceparent, and its instants.

Time: every duration the test uses (delays, leases, clock advances, retention) is a
whole number of minutes, and one example runs in far less than half a minute of real
time. So an instant of a record, taken in half-minute slots since the example began,
is the same in both ledgers, and whether something is due or expired is decided by
those durations alone, never by the milliseconds between the two ledgers' calls.
Imported records are given instants half a minute off that grid, so they never tie
with admitted ones. How milliseconds and claims of one slot are kept from deciding
anything: ``tests/differential_pair.py``, with the views the two ledgers are compared by.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from django_ledger import Claim, Ledger, State
from tests.support.differential_pair import (
    HALF,
    IDS,
    UNIT,
    PairViews,
    expected_index_entries,
    index_entries,
    tick,
    without_fence,
)

OPTIONS: dict[str, Any] = {
    "max_records": 12,
    "max_payload_bytes": 16,
    "max_attempts": 2,
    "retention": 60 * 60,  # an hour
    "max_retained": 6,  # ended records past six are purged, oldest first
}
BAD_IDS = ["", "bad\nid"]
GOOD_PAYLOADS = ["a", "b", "\x00\n🎉"]
PAYLOADS = st.sampled_from([*GOOD_PAYLOADS, "a", "x" * 17])  # the last is too large
DELAYS = st.sampled_from([0, 0, 0, 1, 2, 3])  # in units
OWNERS = ["w1", "w2"]
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
#: Clock advances, in units: a minute up to three days.
ADVANCES = [1, 2, 5, 60, 24 * 60, 3 * 24 * 60]
SETTLE_STATES = [State.COMPLETED, State.FAILED, State.PENDING]
IMPORT_STATES = list(State)

_RUNS = itertools.count()


def build_machine(client: redis.Redis, namespace: str) -> type[RuleBasedStateMachine]:
    class LedgerPair(PairViews, RuleBasedStateMachine):
        """An optimized and a reference ledger that must never disagree."""

        def __init__(self) -> None:
            super().__init__()
            run = next(_RUNS)
            self.opt = Ledger(client, namespace, f"opt{run}", optimized=True, **OPTIONS)
            self.ref = Ledger(client, namespace, f"ref{run}", optimized=False, **OPTIONS)
            self.ledgers = (self.opt, self.ref)
            self.t0 = self.opt.server_time_ms()
            self.skew = 0
            self.gate = False
            #: Claims of the same record, (optimized, reference), stale ones included.
            self.claims: list[tuple[Claim, Claim]] = []
            # Fences come from each queue's counter in claim order, and two records due in
            # one slot may be claimed in either order: each side's fences are compared
            # through the claim they were given to (imported fences stand for themselves).
            self.canon: tuple[dict[tuple[str, int], Any], dict[tuple[str, int], Any]] = ({}, {})
            self.top_fence = [0, 0]

        def teardown(self) -> None:
            client.delete(*self.opt.keys, *self.ref.keys)

        # -- rules -----------------------------------------------------------------------

        @initialize(
            requests=st.lists(
                st.tuples(st.sampled_from(IDS), st.sampled_from(GOOD_PAYLOADS), DELAYS),
                max_size=12,
            )
        )
        def seed(self, requests: list[tuple[str, str, int]]) -> None:
            for request_id, payload, delay in requests:
                self.admit(request_id, payload, delay, traced=False)

        @rule(
            request_id=st.sampled_from(IDS + BAD_IDS),
            payload=PAYLOADS,
            delay=DELAYS,
            traced=st.booleans(),
        )
        def admit(self, request_id: str, payload: str, delay: int, traced: bool) -> None:
            trace = TRACEPARENT if traced else None
            opt, ref = (
                ledger.admit(request_id, payload, delay * UNIT / 1000, trace)
                for ledger in self.ledgers
            )
            assert self.admission_view(opt, 0) == self.admission_view(ref, 1)

        @rule(
            requests=st.lists(
                st.tuples(st.sampled_from(IDS + BAD_IDS), PAYLOADS),
                min_size=1,
                max_size=8,
            ),
            delay=DELAYS,
            priority=st.sampled_from([0, 0, 5, -5, 100]),
        )
        def admit_many(self, requests: list[tuple[str, str]], delay: int, priority: int) -> None:
            opt, ref = (
                ledger.admit_many(requests, delay * UNIT / 1000, priority=priority)
                for ledger in self.ledgers
            )
            assert [self.admission_view(a, 0) for a in opt] == [
                self.admission_view(a, 1) for a in ref
            ]

        @rule(owner=st.sampled_from(OWNERS), lease=st.integers(1, 3))
        def claim(self, owner: str, lease: int) -> None:
            due = self.due_slots()
            if len(due) > 1 and due[0][0] == due[1][0]:
                # The first slot is a tie: one claim could take either record.
                self.claim_many(owner, 1, lease)
                return
            opt, ref = (ledger.claim(owner, lease * UNIT / 1000) for ledger in self.ledgers)
            expected = set() if self.gate or not due else {due[0][1]}
            self.record_claims([c for c in [opt] if c], [c for c in [ref] if c], expected)

        @rule(owner=st.sampled_from(OWNERS), limit=st.integers(1, 40), lease=st.integers(1, 3))
        def claim_many(self, owner: str, limit: int, lease: int) -> None:
            limit, expected = self.whole_slots(limit)
            opt, ref = (
                ledger.claim_many(owner, limit, lease * UNIT / 1000) for ledger in self.ledgers
            )
            self.record_claims(opt, ref, expected)

        @precondition(lambda self: self.claims)
        @rule(data=st.data(), lease=st.integers(1, 3))
        def renew(self, data: st.DataObject, lease: int) -> None:
            pair = data.draw(st.sampled_from(self.claims), label="claim")
            opt, ref = (
                ledger.renew(claim, lease * UNIT / 1000)
                for ledger, claim in zip(self.ledgers, pair, strict=True)
            )
            assert self.settlement_view(opt, 0) == self.settlement_view(ref, 1)
            assert self.claim_view(pair[0], 0) == self.claim_view(pair[1], 1)

        @precondition(lambda self: self.claims)
        @rule(data=st.data(), state=st.sampled_from(SETTLE_STATES), delay=DELAYS)
        def settle(self, data: st.DataObject, state: State, delay: int) -> None:
            pair = data.draw(st.sampled_from(self.claims), label="claim")
            opt, ref = (
                ledger.settle(claim, state, delay * UNIT / 1000)
                for ledger, claim in zip(self.ledgers, pair, strict=True)
            )
            assert self.settlement_view(opt, 0) == self.settlement_view(ref, 1)

        @precondition(lambda self: self.claims)
        @rule(
            data=st.data(),
            state=st.sampled_from(SETTLE_STATES),
            owner=st.sampled_from(OWNERS),
            limit=st.integers(0, 6),
            lease=st.integers(1, 3),
        )
        def settle_and_claim(
            self, data: st.DataObject, state: State, owner: str, limit: int, lease: int
        ) -> None:
            pair = data.draw(st.sampled_from(self.claims), label="claim")
            # A retry is given back a unit or more ahead, so what is due now stays as it is.
            delay = 0 if state is not State.PENDING else data.draw(st.integers(1, 3), "delay")
            if limit:
                limit, expected = self.whole_slots(limit)
            else:
                expected = set()
            answers = [
                ledger.settle_and_claim(
                    [(claim, state, delay * UNIT / 1000)], owner, limit, lease * UNIT / 1000
                )
                for ledger, claim in zip(self.ledgers, pair, strict=True)
            ]
            (opt, opt_claims), (ref, ref_claims) = answers
            assert self.settlement_view(opt[0], 0) == self.settlement_view(ref[0], 1)
            self.record_claims(opt_claims, ref_claims, expected)

        @precondition(lambda self: self.claims)
        @rule(data=st.data())
        def release(self, data: st.DataObject) -> None:
            pair = data.draw(st.sampled_from(self.claims), label="claim")
            opt, ref = (
                ledger.release([claim])[0] for ledger, claim in zip(self.ledgers, pair, strict=True)
            )
            assert self.settlement_view(opt, 0) == self.settlement_view(ref, 1)

        @precondition(lambda self: self.claims)
        @rule(data=st.data())
        def settle_many(self, data: st.DataObject) -> None:
            items = data.draw(
                st.lists(
                    st.tuples(
                        st.sampled_from(self.claims),
                        st.sampled_from(SETTLE_STATES),
                        st.integers(0, 3),
                    ),
                    min_size=1,
                    max_size=5,
                ),
                label="items",
            )
            opt, ref = (
                ledger.settle_many(
                    [(pair[side], state, delay * UNIT / 1000) for pair, state, delay in items]
                )
                for side, ledger in enumerate(self.ledgers)
            )
            assert [self.settlement_view(s, 0) for s in opt] == [
                self.settlement_view(s, 1) for s in ref
            ]

        @rule(count=st.sampled_from([3, 100]))
        def repair(self, count: int) -> None:
            counts = []
            for ledger in self.ledgers:
                totals: dict[str, int] = {}
                cursor = 0
                while True:  # repair_cycle's pages: the sweep, then the HSCAN page
                    swept = ledger.sweep(count)
                    tick(ledger)
                    page = ledger.scan_page(cursor, count)
                    tick(ledger)
                    for report in (swept, page):
                        for name, value in report.counts().items():
                            totals[name] = totals.get(name, 0) + value
                    cursor = int(page.cursor)
                    if cursor == 0:
                        break
                # A page may visit a record twice (HSCAN guarantees at least once).
                del totals["scanned"]
                counts.append(totals)
            assert counts[0] == counts[1]
            assert counts[0]["stale"] == 0

        @rule(units=st.sampled_from(ADVANCES))
        def advance_clock(self, units: int) -> None:
            self.skew += units * UNIT
            for ledger in self.ledgers:
                ledger.clock_skew_ms += units * UNIT  # on from the ticks, never back

        @rule(units=st.sampled_from([4, 64, 3 * 24 * 60]))
        def lapse_and_repair(self, units: int) -> None:
            # What a worker crash looks like: every lease lapses, then repair runs.
            self.advance_clock(units)
            self.repair(100)

        @rule(request_id=st.sampled_from(IDS), how=st.sampled_from(["flip", "cut", "swap"]))
        def corrupt(self, request_id: str, how: str) -> None:
            # Damage the stored bytes the same way in both ledgers (indexes untouched).
            for ledger in self.ledgers:
                raw = ledger.redis.hget(ledger.records_key, request_id)
                if raw is None:
                    continue
                if how == "flip":
                    raw = raw[:-1] + bytes([raw[-1] ^ 1])
                elif how == "cut":
                    raw = raw[:-1]
                else:
                    other = IDS[(IDS.index(request_id) + 1) % len(IDS)]
                    raw = ledger.redis.hget(ledger.records_key, other) or b"junk"
                ledger.redis.hset(ledger.records_key, request_id, raw)

        @rule()
        def close_gate(self) -> None:
            for ledger in self.ledgers:
                ledger.close_gate()
            self.gate = True

        @rule()
        def open_gate(self) -> None:
            for ledger in self.ledgers:
                ledger.open_gate()
            self.gate = False

        @rule(
            request_id=st.sampled_from(IDS),
            payload=st.sampled_from(GOOD_PAYLOADS),
            state=st.sampled_from(IMPORT_STATES),
            due=st.integers(-2, 3),
            lease=st.none() | st.integers(-1, 3),
            counts=st.none() | st.tuples(st.integers(0, 3), st.integers(0, 5)),
        )
        def import_record(
            self,
            request_id: str,
            payload: str,
            state: State,
            due: int,
            lease: int | None,
            counts: tuple[int, int] | None,
        ) -> None:
            base = self.t0 + self.skew + HALF  # off the grid of admitted instants
            extra: dict[str, Any] = {}
            owner = ""
            if state is State.CLAIMED:
                owner = "w1"
                if lease is not None:
                    extra["lease_until"] = base + lease * UNIT
            if counts is not None:
                extra["attempts"], extra["fence"] = counts[0], counts[0] + counts[1]
                if state is State.CLAIMED and counts[0] == 0:
                    # A claim is an attempt: both modes refuse it, and write nothing.
                    for ledger in self.ledgers:
                        with pytest.raises(ValueError, match="at least 1 attempt"):
                            ledger.import_record(
                                request_id, payload, state, base + due * UNIT, owner, **extra
                            )
                    return
            opt, ref = (
                ledger.import_record(request_id, payload, state, base + due * UNIT, owner, **extra)
                for ledger in self.ledgers
            )
            views = [self.admission_view(opt, 0), self.admission_view(ref, 1)]
            if (
                "fence" in extra
                and opt.record
                and ref.record
                and opt.record.fence != ref.record.fence
            ):
                # The queues gave this record's claims their fences in another order (a tie
                # of due slots): whether the given fence is the stored one is no disagreement.
                views = [without_fence(view) for view in views]
            assert views[0] == views[1]
            if opt.status.value == "ADMITTED" and state is State.CLAIMED:
                # Whoever held it before the migration may still settle it.
                record = self.opt.resolve(request_id)
                assert record is not None and record.lease_until is not None
                claims = [
                    Claim(
                        request_id,
                        payload,
                        owner,
                        record.attempts,
                        record.fence,
                        record.lease_until,
                    )
                    for _ in self.ledgers
                ]
                self.claims.append((claims[0], claims[1]))

        # -- after every step ------------------------------------------------------------

        @invariant()
        def every_identity_agrees(self) -> None:
            opt, ref = (self.identities(ledger) for ledger in self.ledgers)
            assert [self.identity_view(i, 0) for i in opt] == [
                self.identity_view(i, 1) for i in ref
            ]

        @invariant()
        def counters_agree(self) -> None:
            opt, ref = (ledger.stats().as_dict() for ledger in self.ledgers)
            for stats in (opt, ref):
                del stats["oldest_due_age_ms"]  # milliseconds of real time
            assert opt == ref
            assert opt["gate_closed"] is self.gate

        @invariant()
        def indexes_follow_records(self) -> None:
            for ledger in self.ledgers:
                assert index_entries(ledger) == expected_index_entries(ledger)

        @invariant()
        def example_is_short(self) -> None:
            # The slot arithmetic above holds while an example lasts under half a minute
            # (its ticks included).
            for ledger in self.ledgers:
                assert ledger.server_time_ms() - self.skew - self.t0 < HALF

        @invariant()
        def clocks_move_on(self) -> None:
            # Not a check: the next step's calls come a millisecond after this one's.
            for ledger in self.ledgers:
                tick(ledger)

    return LedgerPair


#: The examples of a run, in parts: pytest-xdist runs the parts side by side (CI runs
#: ``pytest -n 4``). Each part draws its own random examples (under ``--hypothesis-seed``,
#: its own seed made from it), and all share the example database, so every part replays
#: a failure any of them saved.
EXAMPLES = 60
PARTS = 4


@pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")
@pytest.mark.parametrize("part", range(PARTS))
def test_optimized_and_reference_ledgers_agree(
    redis_client: redis.Redis, namespace: str, part: int, request: pytest.FixtureRequest
) -> None:
    machine = build_machine(redis_client, namespace)
    forced = request.config.getoption("--hypothesis-seed")
    if forced is not None:
        machine = seed(f"{forced}:{part}")(machine)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=EXAMPLES // PARTS,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
