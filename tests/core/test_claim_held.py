"""Held claims: claimed ahead of the work (a worker's prefetch), not started, not spent.

A claim past ``hold_after`` is held until a settlement as CLAIMED (or a renewal with
``started``) marks it started. Repair of a held claim's expired lease gives its attempt
back; the record is then marked so that its next claim starts at once and spends one.
Both ledger modes, and a sharded ledger, answer alike.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from django_ledger import Ledger, SettlementStatus, State
from django_ledger.core.records import Record, decode_record, encode_record
from django_ledger.core.sharded import ShardedLedger
from tests.support.ledger_helpers import expire_and_repair, raw

pytest_plugins = ["tests.support.ledger_fixtures"]

RENEWED = SettlementStatus.RENEWED


def _admitted(ledger: Ledger, count: int) -> list[str]:
    ids = [f"t-{n}" for n in range(count)]
    ledger.admit_many([(request_id, "p") for request_id in ids])
    return ids


def test_claims_past_hold_after_are_held_and_the_record_says_so(ledger: Ledger) -> None:
    _admitted(ledger, 3)
    claims = ledger.claim_many("w", 3, lease=10, hold_after=1)
    assert [claim.held for claim in claims] == [False, True, True]
    records = ledger.resolve_many([claim.request_id for claim in claims])
    assert [record.held for record in records if record] == [False, True, True]
    assert all(record and record.state is State.CLAIMED for record in records)


def test_an_expired_held_claim_is_given_back_with_its_attempt(ledger: Ledger) -> None:
    _admitted(ledger, 2)
    running, held = ledger.claim_many("w", 2, lease=1, hold_after=1)
    report = expire_and_repair(ledger, 2_000)
    assert report.expired == 2
    given = ledger.resolve(held.request_id)
    spent = ledger.resolve(running.request_id)
    assert given is not None and spent is not None
    assert (given.state, given.attempts, given.held, given.given_back) == (
        State.PENDING,
        0,
        False,
        True,
    )
    assert (spent.state, spent.attempts, spent.given_back) == (State.PENDING, 1, False)
    # Given back once, its next claim starts at once (so a task that kills its worker
    # as it starts still spends its attempts), and the mark is gone.
    again = {claim.request_id: claim for claim in ledger.claim_many("w", 2, 10, hold_after=0)}
    assert again[held.request_id].held is False
    assert again[running.request_id].held is True
    record = ledger.resolve(held.request_id)
    assert record is not None and (record.attempts, record.given_back) == (1, False)


def test_a_held_claim_past_max_attempts_is_given_back_not_dead(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(max_attempts=1)
    _admitted(ledger, 1)
    (claim,) = ledger.claim_many("w", 1, lease=1, hold_after=0)
    expire_and_repair(ledger, 2_000)
    record = ledger.resolve(claim.request_id)
    assert record is not None and (record.state, record.attempts) == (State.PENDING, 0)


def test_a_claim_marked_started_spends_its_attempt(ledger: Ledger) -> None:
    _admitted(ledger, 2)
    first, second = ledger.claim_many("w", 2, lease=1, hold_after=0)
    settled, more = ledger.settle_and_claim([(first, State.CLAIMED, 1)], "w", 0)
    assert [answer.status for answer in settled] == [RENEWED] and more == []
    assert first.held is False
    assert ledger.renew_many([(second, 1, True)])[0].status is RENEWED
    assert second.held is False
    expire_and_repair(ledger, 2_000)
    records = ledger.resolve_many([first.request_id, second.request_id])
    assert [(r.state, r.attempts) for r in records if r] == [(State.PENDING, 1)] * 2


def test_a_renewal_without_started_keeps_the_claim_held(ledger: Ledger) -> None:
    _admitted(ledger, 1)
    (claim,) = ledger.claim_many("w", 1, lease=1, hold_after=0)
    assert ledger.renew(claim, 1).status is RENEWED
    record = ledger.resolve(claim.request_id)
    assert record is not None and record.held and claim.held


def test_settling_or_releasing_a_held_claim_clears_the_mark(ledger: Ledger) -> None:
    _admitted(ledger, 2)
    done, back = ledger.claim_many("w", 2, lease=10, hold_after=0)
    ledger.settle(done, State.COMPLETED)
    ledger.release([back])
    records = ledger.resolve_many([done.request_id, back.request_id])
    assert [(r.state, r.held, r.given_back, r.attempts) for r in records if r] == [
        (State.COMPLETED, False, False, 1),
        (State.PENDING, False, False, 0),
    ]


def test_started_needs_a_lease(ledger: Ledger) -> None:
    _admitted(ledger, 1)
    (claim,) = ledger.claim_many("w", 1, lease=10)
    with pytest.raises(ValueError, match="lease"):
        ledger.settle_many([(claim, State.CLAIMED)])
    with pytest.raises(ValueError, match="lease"):
        ledger.settle_many([(claim, State.CLAIMED, 0)])
    with pytest.raises(TypeError):
        ledger.renew_many([(claim, 1, "yes")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="hold_after"):
        ledger.claim_many("w", 1, hold_after=-1)


def test_a_sharded_ledger_holds_claims_past_hold_after_across_shards(
    ledger_factory: Callable[..., Ledger], redis_client: object, namespace: str
) -> None:
    sharded = ShardedLedger(redis_client, namespace, "held", shards=3)
    ids = [f"s-{n}" for n in range(6)]
    sharded.admit_many([(request_id, "p") for request_id in ids])
    claims = sharded.claim_many("w", 6, lease=10, hold_after=2)
    assert [claim.held for claim in claims] == [False] * 2 + [True] * 4
    settled, more = sharded.settle_and_claim([], "w", 0, hold_after=0)
    assert settled == [] and more == []


def test_version_3_bytes_round_trip_and_version_1_bytes_stay_as_they_were() -> None:
    base = Record("a", "hi", State.CLAIMED, 5, owner="w", attempts=1, fence=1, lease_until=9)
    held = Record("a", "hi", State.CLAIMED, 5, "w", 1, 1, 9, held=True, priority=-3)
    given = Record("a", "hi", State.PENDING, 5, "w", 0, 1, given_back=True)
    assert encode_record(base)[:1] == b"1"
    for record in (held, given):
        data = encode_record(record)
        assert data[:1] == b"3"
        assert decode_record("a", data) == record
    with pytest.raises(ValueError, match="CLAIMED"):
        encode_record(Record("a", "hi", State.PENDING, 5, held=True))


def test_the_scripts_read_python_s_version_3_bytes(ledger: Ledger) -> None:
    """A held claim written by one path is given back by the other's repair."""
    _admitted(ledger, 1)
    (claim,) = ledger.claim_many("w", 1, lease=1, hold_after=0)
    stored = raw(ledger, claim.request_id)
    assert stored is not None and stored[:1] == b"3"
    twin = Ledger(ledger.redis, ledger.namespace, ledger.queue, optimized=not ledger.optimized)
    twin.clock_skew_ms = ledger.clock_skew_ms
    assert expire_and_repair(twin, 2_000).expired == 1
    record = twin.resolve(claim.request_id)
    assert record is not None and (record.attempts, record.given_back) == (0, True)
