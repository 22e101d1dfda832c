"""max_attempts: the ledger gives up (DEAD) when a lease expires after the last claim."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from django_ledger import AdmissionStatus, Ledger, SettlementStatus, State
from tests.support.ledger_helpers import dump, expire_and_repair, indexes_of

pytest_plugins = ["tests.support.ledger_fixtures"]


@pytest.mark.parametrize("max_attempts", [1, 2, 3])
def test_dead_after_max_attempts_expiries(
    ledger_factory: Callable[..., Ledger], max_attempts: int
) -> None:
    ledger = ledger_factory(max_attempts=max_attempts)
    ledger.admit("a", "p")
    fences = []
    for attempt in range(1, max_attempts + 1):
        claim = ledger.claim("w", lease=10)
        assert claim is not None
        assert claim.attempt == attempt
        fences.append(claim.fence)
        report = expire_and_repair(ledger, 11_000)
        if attempt < max_attempts:
            assert (report.expired, report.dead) == (1, 0)
            record = ledger.resolve("a")
            assert record is not None
            assert record.state is State.PENDING
        else:
            assert (report.expired, report.dead) == (0, 1)
    assert fences == sorted(set(fences))

    record = ledger.resolve("a")
    assert record is not None
    assert record.state is State.DEAD
    assert record.attempts == max_attempts
    assert record.lease_until is None
    assert indexes_of(ledger, "a") == {"dead": record.updated_at}
    assert ledger.claim("w") is None
    stats = ledger.stats()
    assert (stats.dead, stats.claimed, stats.pending, stats.total) == (1, 0, 0, 1)


def test_dead_record_stays_dead(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_attempts=1)
    ledger.admit("a", "p")
    claim = ledger.claim("w", lease=10)
    assert claim is not None
    expire_and_repair(ledger, 11_000)
    before = dump(ledger)
    # The worker that lost it cannot bring it back.
    for state in (State.COMPLETED, State.FAILED, State.PENDING):
        settlement = ledger.settle(claim, state)
        assert (settlement.status, settlement.reason) == (SettlementStatus.LOST, "not_claimed")
    assert ledger.renew(claim).status is SettlementStatus.LOST
    # A new admission of the same request is recognised, not run again.
    assert ledger.admit("a", "p").status is AdmissionStatus.DUPLICATE
    assert ledger.admit("a", "q").status is AdmissionStatus.CONFLICT
    # Repair leaves it alone within retention.
    assert expire_and_repair(ledger, 0).dead == 0
    assert dump(ledger) == before


def test_a_settled_retry_is_not_an_expiry(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_attempts=2)
    ledger.admit("a", "p")
    for _ in range(3):  # more claims than max_attempts, each given back by its worker
        claim = ledger.claim("w", lease=10)
        assert claim is not None
        assert ledger.settle(claim, State.PENDING).ok
    record = ledger.resolve("a")
    assert record is not None
    assert (record.state, record.attempts) == (State.PENDING, 3)


def test_only_expired_records_die(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_attempts=1)
    ledger.admit("short", "p")
    ledger.claim("w", lease=10)
    ledger.admit("long", "p")
    ledger.claim("w", lease=600)
    report = expire_and_repair(ledger, 11_000)
    assert report.dead == 1
    states = {r.request_id: r.state for r in ledger.resolve_many(["short", "long"]) if r}
    assert states == {"short": State.DEAD, "long": State.CLAIMED}
    assert ledger.stats().dead == 1
