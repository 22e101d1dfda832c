"""settle and settle_many: end a claim once, give it back as a retry, or answer LOST.

The LOST cases run for a renewal too: a claim that no longer holds its record answers
LOST to both, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
import redis

from django_ledger import Claim, Ledger, Settlement, SettlementStatus, State
from tests.support.ledger_helpers import (
    advance,
    corrupt,
    count_calls,
    dump,
    expire_and_repair,
    fused_twin,
    indexes_of,
    raw,
)

pytest_plugins = ["tests.support.ledger_fixtures"]

SETTLED = SettlementStatus.SETTLED
LOST = SettlementStatus.LOST


def _claimed(ledger: Ledger, request_id: str = "a", lease: float = 10) -> Claim:
    ledger.admit(request_id, "p")
    claim = ledger.claim("w", lease=lease)
    assert claim is not None
    assert claim.request_id == request_id
    return claim


@pytest.mark.parametrize(
    ("state", "index_name"), [(State.COMPLETED, "completed"), (State.FAILED, "failed")]
)
def test_completed_or_failed_ends_it(ledger: Ledger, state: State, index_name: str) -> None:
    claim = _claimed(ledger)
    before = ledger.server_time_ms()
    settlement = ledger.settle(claim, state)
    after = ledger.server_time_ms()

    assert settlement.status is SETTLED
    assert settlement.ok
    assert settlement.reason is None
    record = settlement.record
    assert record is not None
    assert record == ledger.resolve("a")
    assert record.state is state
    assert record.lease_until is None
    assert (record.owner, record.attempts, record.fence) == ("w", 1, claim.fence)
    assert before <= record.updated_at <= after
    # Out of leases and ready, in its terminal index scored by when it ended.
    assert indexes_of(ledger, "a") == {index_name: record.updated_at}
    assert ledger.claim("w") is None


def test_default_state_is_completed(ledger: Ledger) -> None:
    claim = _claimed(ledger)
    settlement = ledger.settle(claim)
    assert settlement.record is not None
    assert settlement.record.state is State.COMPLETED


@pytest.mark.parametrize(
    ("delay", "delay_ms"), [(0, 0), (30, 30_000), (timedelta(minutes=10), 600_000), (0.5, 500)]
)
def test_pending_gives_it_back_due_at_now_plus_delay(
    ledger: Ledger, delay: timedelta | float, delay_ms: int
) -> None:
    claim = _claimed(ledger)
    before = ledger.server_time_ms()
    settlement = ledger.settle(claim, State.PENDING, delay=delay)
    after = ledger.server_time_ms()

    assert settlement.status is SETTLED
    record = settlement.record
    assert record is not None
    assert record == ledger.resolve("a")
    assert record.state is State.PENDING
    assert record.lease_until is None
    assert before + delay_ms <= record.due_at <= after + delay_ms
    assert record.fence == claim.fence
    assert indexes_of(ledger, "a") == {"ready": record.due_at}


def test_retry_is_claimable_after_its_delay(ledger: Ledger) -> None:
    claim = _claimed(ledger)
    ledger.settle(claim, State.PENDING, delay=60)
    assert ledger.claim("w") is None
    advance(ledger, 61_000)
    again = ledger.claim("w2")
    assert again is not None
    assert (again.request_id, again.attempt, again.owner) == ("a", 2, "w2")
    assert again.fence > claim.fence


def test_delay_is_ignored_for_an_ending(ledger: Ledger) -> None:
    claim = _claimed(ledger)
    settlement = ledger.settle(claim, State.COMPLETED, delay=3600)
    assert settlement.record is not None
    assert settlement.record.state is State.COMPLETED


# -- LOST: a claim that no longer holds its record, renewed or settled ---------------------

#: What one claim does to its record: (the call, what it answers while the claim holds).
ACTS: dict[str, tuple[Callable[[Ledger, Claim], Settlement], SettlementStatus]] = {
    "renew": (lambda ledger, claim: ledger.renew(claim, lease=600), SettlementStatus.RENEWED),
    "complete": (lambda ledger, claim: ledger.settle(claim), SettlementStatus.SETTLED),
    "fail": (lambda ledger, claim: ledger.settle(claim, State.FAILED), SettlementStatus.SETTLED),
    "retry": (lambda ledger, claim: ledger.settle(claim, State.PENDING), SettlementStatus.SETTLED),
}


@pytest.fixture(params=list(ACTS))
def act(request: pytest.FixtureRequest) -> tuple[Callable[[Ledger, Claim], Settlement], object]:
    return ACTS[request.param]


def _lost(ledger: Ledger, act: Callable[[Ledger, Claim], Settlement], claim: Claim) -> str | None:
    """Act with ``claim``: LOST, nothing written; return the reason."""
    before = dump(ledger)
    settlement = act(ledger, claim)
    assert settlement.status is LOST
    assert not settlement.ok
    assert dump(ledger) == before
    return settlement.reason


@pytest.mark.parametrize("past", [10_000, 10_001])  # at lease_until (expired) and after it
def test_lost_after_the_lease_expired(ledger: Ledger, act: tuple, past: int) -> None:
    claim = _claimed(ledger, lease=10)
    advance(ledger, past)
    before = dump(ledger)
    settlement = act[0](ledger, claim)
    assert (settlement.status, settlement.reason, settlement.record) == (
        LOST,
        "lease_expired",
        None,
    )
    assert not settlement.ok
    assert dump(ledger) == before


@pytest.mark.parametrize("same_owner", [False, True])
def test_lost_after_another_claim_took_the_record(
    ledger: Ledger, act: tuple, same_owner: bool
) -> None:
    do, holding = act
    old = _claimed(ledger, lease=10)
    assert expire_and_repair(ledger, 11_000).expired == 1
    new = ledger.claim("w" if same_owner else "other", lease=60)
    assert new is not None
    assert new.request_id == "a"
    assert new.fence > old.fence
    assert _lost(ledger, do, old) == "superseded"
    # The newer claim is untouched and still holds the record.
    assert do(ledger, new).status is holding


def test_lost_after_repair_took_it_back(ledger: Ledger, act: tuple) -> None:
    claim = _claimed(ledger, lease=10)
    expire_and_repair(ledger, 11_000)
    assert _lost(ledger, act[0], claim) == "not_claimed"


def test_renew_lost_after_settle(ledger: Ledger) -> None:
    """(Settling again is a replay or LOST: the replays below.)"""
    claim = _claimed(ledger)
    ledger.settle(claim)
    assert _lost(ledger, ACTS["renew"][0], claim) == "not_claimed"


def test_lost_on_corrupt_bytes(ledger: Ledger, act: tuple) -> None:
    claim = _claimed(ledger)
    corrupt(ledger, "a")
    assert _lost(ledger, act[0], claim) == "corrupt"


def test_lost_on_a_flipped_byte(ledger: Ledger, act: tuple) -> None:
    claim = _claimed(ledger)
    stored = raw(ledger, "a")
    assert stored is not None
    ledger.redis.hset(ledger.records_key, "a", stored[:-1] + b"!")
    assert _lost(ledger, act[0], claim) == "corrupt"


def test_lost_on_a_missing_record(ledger: Ledger, act: tuple) -> None:
    claim = _claimed(ledger)
    ledger.redis.hdel(ledger.records_key, "a")
    assert _lost(ledger, act[0], claim) == "missing"


def test_lost_for_a_forged_claim(ledger: Ledger, act: tuple) -> None:
    do, holding = act
    claim = _claimed(ledger)
    for forged in (
        Claim("a", "p", "intruder", claim.attempt, claim.fence, claim.lease_until),
        Claim("a", "p", "intruder", 1, claim.fence, claim.lease_until),
        Claim("a", "p", "w", claim.attempt, claim.fence + 1, claim.lease_until),
        Claim("a", "p", "w", claim.attempt, claim.fence - 1, claim.lease_until),
        Claim("a", "p", "w", 1, claim.fence - 1, claim.lease_until),
    ):
        assert _lost(ledger, do, forged) == "superseded"
    assert do(ledger, claim).status is holding


# -- replays --------------------------------------------------------------------------------


@pytest.mark.parametrize("state", [State.COMPLETED, State.FAILED])
def test_replayed_settle_answers_settled_again_without_change(ledger: Ledger, state: State) -> None:
    claim = _claimed(ledger)
    first = ledger.settle(claim, state)
    before = dump(ledger)
    advance(ledger, 60_000)  # even after the lease would have expired
    again = ledger.settle(claim, state)
    assert again.status is SETTLED
    assert again.record == first.record
    assert dump(ledger) == before


@pytest.mark.parametrize(
    ("first", "then"),
    [
        (State.COMPLETED, State.FAILED),
        (State.FAILED, State.COMPLETED),
        (State.COMPLETED, State.PENDING),
    ],
)
def test_settling_again_another_way_is_lost(ledger: Ledger, first: State, then: State) -> None:
    claim = _claimed(ledger)
    ledger.settle(claim, first)
    before = dump(ledger)
    settlement = ledger.settle(claim, then)
    assert (settlement.status, settlement.reason) == (LOST, "not_claimed")
    assert dump(ledger) == before


# -- settle_many ----------------------------------------------------------------------------


def test_settle_many_answers_in_order(ledger: Ledger) -> None:
    ledger.admit_many([("a", "p"), ("b", "p"), ("c", "p")])
    a, b, c = ledger.claim_many("w", 3)
    answers = ledger.settle_many(
        [(a, State.COMPLETED), (b, State.FAILED, 0), (c, State.PENDING, timedelta(seconds=30))]
    )
    assert [s.status for s in answers] == [SETTLED] * 3
    assert [s.record.state for s in answers if s.record] == [
        State.COMPLETED,
        State.FAILED,
        State.PENDING,
    ]
    assert set(indexes_of(ledger, "a")) == {"completed"}
    assert set(indexes_of(ledger, "b")) == {"failed"}
    assert set(indexes_of(ledger, "c")) == {"ready"}


def test_settle_many_one_bad_item_only_fails_that_item(ledger: Ledger) -> None:
    ledger.admit_many([(i, "p") for i in "abcde"])
    a, b, c, d, e = ledger.claim_many("w", 5, lease=10)
    corrupt(ledger, "b")
    ledger.redis.hdel(ledger.records_key, "d")
    forged = Claim("e", "p", "intruder", 1, e.fence, e.lease_until)
    answers = ledger.settle_many(
        [
            (a, State.COMPLETED),
            (b, State.COMPLETED),
            (c, State.FAILED),
            (d, State.COMPLETED),
            (forged, State.COMPLETED),
            (e, State.COMPLETED),
        ]
    )
    assert [(s.status, s.reason) for s in answers] == [
        (SETTLED, None),
        (LOST, "corrupt"),
        (SETTLED, None),
        (LOST, "missing"),
        (LOST, "superseded"),
        (SETTLED, None),
    ]


def test_settle_many_with_an_expired_item(ledger: Ledger) -> None:
    ledger.admit("short", "p")
    short = ledger.claim("w", lease=5)
    ledger.admit("long", "p")
    long = ledger.claim("w", lease=600)
    assert short is not None and long is not None
    advance(ledger, 6_000)
    answers = ledger.settle_many([(short, State.COMPLETED), (long, State.COMPLETED)])
    assert [(s.status, s.reason) for s in answers] == [(LOST, "lease_expired"), (SETTLED, None)]


def test_settle_many_of_the_same_claim_twice(ledger: Ledger) -> None:
    claim = _claimed(ledger)
    answers = ledger.settle_many([(claim, State.COMPLETED), (claim, State.COMPLETED)])
    assert [s.status for s in answers] == [SETTLED, SETTLED]
    answers = ledger.settle_many([(claim, State.FAILED)])
    assert answers[0].status is LOST


def test_settle_many_of_nothing(ledger: Ledger) -> None:
    assert ledger.settle_many([]) == []


@pytest.mark.parametrize(("count", "calls"), [(128, 1), (129, 2), (300, 3)])
def test_settle_many_one_round_trip_per_batch(
    ledger: Ledger, redis_client: redis.Redis, count: int, calls: int
) -> None:
    stage = fused_twin(ledger)
    stage.admit_many((f"r{n:03}", "p") for n in range(count))
    claims = stage.claim_many("w", count, lease=600)
    assert len(claims) == count
    with count_calls(redis_client) as counted:
        answers = ledger.settle_many((c, State.COMPLETED) for c in claims)
    assert [s.status for s in answers] == [SETTLED] * count
    if ledger.optimized:
        assert counted.fcall == calls
    assert ledger.stats().completed == count


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "error"),
    [
        (State.CLAIMED, ValueError),
        (State.DEAD, ValueError),
        ("COMPLETED", TypeError),
        ("completed", TypeError),
        (None, TypeError),
        (1, TypeError),
    ],
)
def test_bad_state(ledger: Ledger, state: object, error: type[Exception]) -> None:
    claim = _claimed(ledger)
    before = dump(ledger)
    with pytest.raises(error):
        ledger.settle(claim, state)  # type: ignore[arg-type]
    assert dump(ledger) == before


@pytest.mark.parametrize(
    ("delay", "error"),
    [(-1, ValueError), (float("inf"), ValueError), ("5", TypeError), (None, TypeError)],
)
def test_bad_delay(ledger: Ledger, delay: object, error: type[Exception]) -> None:
    claim = _claimed(ledger)
    before = dump(ledger)
    with pytest.raises(error, match="delay"):
        ledger.settle(claim, State.PENDING, delay=delay)  # type: ignore[arg-type]
    assert dump(ledger) == before


@pytest.mark.parametrize("claim", [None, "a", 1])
def test_non_claim_is_a_type_error(ledger: Ledger, claim: object) -> None:
    with pytest.raises(TypeError):
        ledger.settle(claim)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        "item",
        None,
        (),
        ("claim",),
        ("x", State.COMPLETED),
        (None, State.COMPLETED, 0, 1),
    ],
)
def test_settle_many_bad_item_settles_nothing(
    ledger_factory: Callable[..., Ledger], bad: object
) -> None:
    ledger = ledger_factory()
    good = _claimed(ledger)
    before = dump(ledger)
    with pytest.raises(TypeError):
        ledger.settle_many([(good, State.COMPLETED), bad])  # type: ignore[list-item]
    assert dump(ledger) == before


def test_settle_many_bad_state_settles_nothing(ledger: Ledger) -> None:
    good = _claimed(ledger)
    before = dump(ledger)
    with pytest.raises(ValueError):
        ledger.settle_many([(good, State.COMPLETED), (good, State.DEAD)])
    assert dump(ledger) == before
