"""Fences never repeat: a purged and re-admitted id gets a fence above every earlier one.

The probe's case: admit, claim (c1), settle, purge, admit the same id again, claim. The
new claim answered fence 1 again and ``settle(c1)`` settled the new record. Fences come
from a queue-wide counter now: every path that purges is covered, in both modes.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from django_ledger import Claim, Ledger, SettlementStatus, State
from tests.support.ledger_helpers import advance, repair_all

pytest_plugins = ["tests.support.ledger_fixtures"]


def _readmitted(ledger: Ledger, purge: Callable[[Ledger], None]) -> tuple[Claim, Claim]:
    ledger.admit("job-1", "v1")
    first = ledger.claim("worker-7")
    assert first is not None
    assert ledger.settle(first, State.COMPLETED).ok
    purge(ledger)
    assert ledger.resolve("job-1") is None
    assert ledger.admit("job-1", "v2").status.value == "ADMITTED"
    second = ledger.claim("worker-7")
    assert second is not None and second.request_id == "job-1"
    return first, second


def _by_retention(ledger: Ledger) -> None:
    advance(ledger, ledger.retention_ms + 1)
    assert repair_all(ledger).purged == 1


def _by_count(ledger: Ledger) -> None:
    # Another record ends: past max_retained=1 the oldest ended one (job-1) goes.
    ledger.admit("other", "p")
    advance(ledger, 1)
    claim = ledger.claim("worker-7")
    assert claim is not None and claim.request_id == "other"
    assert ledger.settle(claim, State.COMPLETED).ok


@pytest.mark.parametrize("purge", [_by_retention, _by_count], ids=["retention", "count"])
def test_a_stale_claim_cannot_settle_a_readmitted_record(
    ledger_factory: Callable[..., Ledger], purge: Callable[[Ledger], None]
) -> None:
    ledger = ledger_factory(retention=60, max_retained=1)
    first, second = _readmitted(ledger, purge)
    assert second.fence > first.fence
    stale = ledger.settle(first, State.COMPLETED)
    assert (stale.status, stale.reason) == (SettlementStatus.LOST, "superseded")
    record = ledger.resolve("job-1")
    assert record is not None and record.state is State.CLAIMED and record.payload == "v2"
    assert ledger.settle(second, State.COMPLETED).ok


def test_fences_grow_across_records_and_attempts(ledger: Ledger) -> None:
    ledger.admit_many([("a", "p"), ("b", "p")])
    seen = []
    for _ in range(3):
        claims = ledger.claim_many("w", 2)
        seen += [claim.fence for claim in claims]
        ledger.settle_many([(claim, State.PENDING) for claim in claims])
    assert seen == sorted(seen) and len(set(seen)) == 6


def test_an_imported_fence_is_a_floor(ledger: Ledger) -> None:
    ledger.admit("first", "p")
    first = ledger.claim("w")
    assert first is not None
    floor = first.fence + 40  # above the queue's counter
    ledger.close_gate()
    now = ledger.server_time_ms()
    ledger.import_record("moved", "p", State.PENDING, now - 1_000, attempts=3, fence=floor)
    ledger.open_gate()
    ledger.admit("fresh", "p")
    advance(ledger, 1)
    moved = ledger.claim("w")
    assert moved is not None and moved.request_id == "moved" and moved.fence == floor + 1
    fresh = ledger.claim("w")
    assert fresh is not None and fresh.fence == floor + 2  # the counter moved past the floor


def _by_operator(ledger: Ledger) -> None:
    # The admin's Purge: operations.purge, a compare-and-set on the bytes shown.
    from django_ledger import operations

    shown = operations.snapshot(ledger, "job-1")
    assert shown is not None
    operations.purge(ledger, "job-1", shown.version)


def test_an_operator_purge_does_not_restart_fences(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory()
    first, second = _readmitted(ledger, _by_operator)
    assert second.fence > first.fence
    assert ledger.settle(first, State.COMPLETED).status is SettlementStatus.LOST
    record = ledger.resolve("job-1")
    assert record is not None and record.state is State.CLAIMED
