"""retention: terminal records are remembered for a while, then repair purges them."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from django_ledger import AdmissionStatus, Ledger, State
from tests.support.ledger_helpers import advance, expire_and_repair, indexes_of, repair_all

pytest_plugins = ["tests.support.ledger_fixtures"]

RETENTION_MS = 600_000


def _ended(ledger: Ledger, request_id: str, state: State) -> None:
    ledger.admit(request_id, "p")
    claim = ledger.claim("w", lease=10)
    assert claim is not None
    assert claim.request_id == request_id
    if state is State.DEAD:
        assert expire_and_repair(ledger, 11_000).dead == 1
    else:
        assert ledger.settle(claim, state).ok


@pytest.mark.parametrize("state", [State.COMPLETED, State.FAILED, State.DEAD])
def test_terminal_purged_after_retention_and_not_before(
    ledger_factory: Callable[..., Ledger], state: State
) -> None:
    ledger = ledger_factory(retention=timedelta(milliseconds=RETENTION_MS), max_attempts=1)
    _ended(ledger, "a", state)
    record = ledger.resolve("a")
    assert record is not None
    assert record.state is state

    assert repair_all(ledger).purged == 0
    advance(ledger, RETENTION_MS - 10_000)
    assert repair_all(ledger).purged == 0
    assert ledger.resolve("a") == record
    assert set(indexes_of(ledger, "a")) == {state.value.lower()}

    advance(ledger, 11_000)
    assert repair_all(ledger).purged == 1
    assert ledger.resolve("a") is None
    assert indexes_of(ledger, "a") == {}
    assert ledger.stats().total == 0


def test_duplicate_admission_recognised_within_retention(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(retention=timedelta(milliseconds=RETENTION_MS))
    _ended(ledger, "a", State.COMPLETED)
    advance(ledger, RETENTION_MS - 10_000)
    repair_all(ledger)
    assert ledger.admit("a", "p").status is AdmissionStatus.DUPLICATE
    assert ledger.admit("a", "other").status is AdmissionStatus.CONFLICT
    # Once purged, the id is forgotten: a new admission is a new request.
    advance(ledger, 11_000)
    repair_all(ledger)
    admission = ledger.admit("a", "other")
    assert admission.status is AdmissionStatus.ADMITTED
    assert admission.record is not None
    assert admission.record.attempts == 0


def test_pending_and_claimed_are_never_purged(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(retention=0)
    ledger.admit("waiting", "p", delay=3600 * 24 * 30)
    ledger.admit("held", "p")
    claim = ledger.claim("w", lease=3600 * 24 * 60)
    assert claim is not None
    advance(ledger, 3600 * 24 * 40 * 1000)
    assert repair_all(ledger).purged == 0
    assert {r.request_id for r in ledger.resolve_many(["waiting", "held"]) if r} == {
        "waiting",
        "held",
    }


def test_retention_counts_from_when_it_ended(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(retention=60)
    ledger.admit("a", "p")
    claim = ledger.claim("w", lease=600)
    assert claim is not None
    advance(ledger, 120_000)  # older than retention since admission, but still claimed
    assert ledger.settle(claim).ok
    assert repair_all(ledger).purged == 0
    advance(ledger, 61_000)
    assert repair_all(ledger).purged == 1


def test_zero_retention_purges_on_the_next_repair(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(retention=0)
    _ended(ledger, "a", State.COMPLETED)
    assert repair_all(ledger).purged == 1
    assert ledger.resolve("a") is None
