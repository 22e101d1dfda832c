"""claim_many: up to a limit, one round trip per batch of 128."""

from __future__ import annotations

import pytest
import redis

from django_ledger import MAX_BATCH, Ledger, State
from tests.support.ledger_helpers import advance, corrupt, count_calls, fused_twin, index

pytest_plugins = ["tests.support.ledger_fixtures"]


def _fill(ledger: Ledger, count: int) -> list[str]:
    ids = [f"r{n:04}" for n in range(count)]
    fused_twin(ledger).admit_many((i, f"payload {i}") for i in ids)
    return ids


def test_limit_is_respected(ledger: Ledger) -> None:
    ids = _fill(ledger, 10)
    first = ledger.claim_many("w", 3)
    assert [c.request_id for c in first] == ids[:3]
    rest = ledger.claim_many("w", 100)
    assert [c.request_id for c in rest] == ids[3:]
    assert ledger.claim_many("w", 5) == []
    assert index(ledger, ledger.ready_key) == {}
    assert set(index(ledger, ledger.leases_key)) == set(ids)


def test_every_claim_is_complete(ledger: Ledger) -> None:
    ids = _fill(ledger, 5)
    before = ledger.server_time_ms()
    claims = ledger.claim_many("owner-x", 5, lease=20)
    after = ledger.server_time_ms()
    assert [c.request_id for c in claims] == ids
    # Fences come from the queue-wide counter: one each, in claim order.
    first = claims[0].fence
    assert [c.fence for c in claims] == list(range(first, first + 5))
    for claim in claims:
        assert claim.payload == f"payload {claim.request_id}"
        assert claim.owner == "owner-x"
        assert claim.attempt == 1
        assert before + 20_000 <= claim.lease_until <= after + 20_000
        record = ledger.resolve(claim.request_id)
        assert record is not None
        assert record.state is State.CLAIMED
        assert record.lease_until == claim.lease_until


def test_only_due_records_are_claimed(ledger: Ledger) -> None:
    ledger.admit_many([("now-1", "p"), ("now-2", "p")])
    ledger.admit_many([("later-1", "p"), ("later-2", "p")], delay=60)
    assert [c.request_id for c in ledger.claim_many("w", 10)] == ["now-1", "now-2"]
    advance(ledger, 61_000)
    assert [c.request_id for c in ledger.claim_many("w", 10)] == ["later-1", "later-2"]


def test_corrupt_records_are_skipped_within_the_limit(ledger: Ledger) -> None:
    ids = _fill(ledger, 6)
    corrupt(ledger, ids[0])
    corrupt(ledger, ids[2])
    claims = ledger.claim_many("w", 3)
    assert [c.request_id for c in claims] == [ids[1], ids[3], ids[4]]
    assert [c.request_id for c in ledger.claim_many("w", 10)] == [ids[5]]


@pytest.mark.parametrize(
    ("records", "limit", "claimed", "calls"),
    [
        (300, 200, 200, 2),  # 128 + 72
        (300, 256, 256, 2),  # 128 + 128
        (300, 1000, 300, 3),  # 128 + 128 + 44 (short: no fourth call)
        (256, 300, 256, 3),  # 128 + 128, then a third that finds nothing
        (129, 129, 129, 2),
        (128, 128, 128, 1),
        (50, 128, 50, 1),
    ],
)
def test_one_round_trip_per_batch_of_128(
    ledger: Ledger, redis_client: redis.Redis, records: int, limit: int, claimed: int, calls: int
) -> None:
    ids = _fill(ledger, records)
    with count_calls(redis_client) as counted:
        claims = ledger.claim_many("w", limit)
    assert [c.request_id for c in claims] == ids[:claimed]
    assert len({c.request_id for c in claims}) == claimed
    if ledger.optimized:
        assert counted.fcall == calls


def test_more_than_a_batch_with_fences_and_leases(ledger: Ledger) -> None:
    _fill(ledger, MAX_BATCH + 10)
    claims = ledger.claim_many("w", MAX_BATCH + 10, lease=60)
    assert len(claims) == MAX_BATCH + 10
    assert {c.attempt for c in claims} == {1}
    first = claims[0].fence
    assert [c.fence for c in claims] == list(range(first, first + MAX_BATCH + 10))
    assert len(index(ledger, ledger.leases_key)) == MAX_BATCH + 10
    assert ledger.stats().claimed == MAX_BATCH + 10


def test_gate_closed_claims_nothing(ledger: Ledger, redis_client: redis.Redis) -> None:
    _fill(ledger, 200)
    ledger.close_gate()
    with count_calls(redis_client) as counted:
        assert ledger.claim_many("w", 200) == []
    if ledger.optimized:
        assert counted.fcall == 1
