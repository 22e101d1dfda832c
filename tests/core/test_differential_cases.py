"""Disagreements ``test_differential`` found, each replayed as a plain test in both modes.

Each test is the short deterministic core of a failing example of the state machine,
and asserts what the contract says, in the optimized and in the reference mode alike.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from django_ledger import Claim, Ledger, SettlementStatus, State
from tests.support.ledger_helpers import advance, corrupt, indexes_of, raw, repair_all

pytest_plugins = ["tests.support.ledger_fixtures"]

HOUR_MS = 3_600_000


def _claimed(ledger: Ledger, ids: list[str]) -> dict[str, Claim]:
    """Admit ``ids`` due now and claim them all, by request id."""
    for request_id in ids:
        ledger.admit(request_id, "p")
    claims = ledger.claim_many("w", len(ids), lease=60)
    assert sorted(claim.request_id for claim in claims) == sorted(ids)
    return {claim.request_id: claim for claim in claims}


def test_records_ended_in_one_batch_end_at_its_one_instant(
    ledger_factory: Callable[..., Ledger],
) -> None:
    # The root of the two cases below: a batch settled in one script ends its records at one instant, the reference path
    # ended them a millisecond or so apart, so the two modes disagreed on the oldest.
    ledger = ledger_factory()
    ids = [f"r{i:02d}" for i in range(40)]
    claims = _claimed(ledger, ids)
    answers = ledger.settle_many([(claims[i], State.COMPLETED) for i in reversed(ids)])
    assert all(answer.status is SettlementStatus.SETTLED for answer in answers)
    ended = {answer.record.updated_at for answer in answers if answer.record is not None}
    assert len(ended) == 1
    assert {record.updated_at for record in ledger.resolve_many(ids) if record} == ended


def test_records_claimed_in_one_batch_are_claimed_at_its_one_instant(
    ledger_factory: Callable[..., Ledger],
) -> None:
    # The root of the case below: a batch claimed in one script takes its records at one
    # instant, the reference path took them a millisecond or so apart, so their leases
    # ran out in another order.
    ledger = ledger_factory()
    ids = [f"r{i:02d}" for i in range(40)]
    claims = _claimed(ledger, ids)
    leases = {claim.lease_until for claim in claims.values()}
    assert len(leases) == 1
    records = [record for record in ledger.resolve_many(ids) if record is not None]
    assert {record.lease_until for record in records} == leases
    assert {record.updated_at for record in records} == {leases.pop() - 60_000}


def test_repair_ends_expired_claims_of_one_batch_lowest_id_first(
    ledger_factory: Callable[..., Ledger],
) -> None:
    # Found as records DEAD in one mode and purged past max_retained in the other: the
    # claims of one batch expire together, so a repair bounded by count ends the lowest
    # ids first (ties: the lowest id), and those are the oldest ended records to purge.
    ledger = ledger_factory(max_attempts=1, max_retained=4)
    ids = ["r05", "r04", "r03", "r02", "r01", "r00"]
    for delay, request_id in enumerate(ids):  # due, and so claimed, in this order
        ledger.admit(request_id, "p", delay=delay)
    advance(ledger, 10_000)
    _claimed(ledger, ids)
    advance(ledger, 61_000)
    assert ledger.sweep(count=2).dead == 2
    dead = [
        record.request_id
        for record in ledger.resolve_many(ids)
        if record and record.state is State.DEAD
    ]
    assert sorted(dead) == ["r00", "r01"]
    advance(ledger, 1000)
    assert ledger.sweep(count=100).dead == 4
    advance(ledger, 1000)
    assert ledger.sweep(count=100).purged == 2
    assert ledger.resolve_many(["r00", "r01"]) == [None, None]
    assert all(record and record.state is State.DEAD for record in ledger.resolve_many(ids[:4]))


@pytest.mark.parametrize("damaged", [False, True], ids=["intact", "r03_corrupt"])
def test_trim_past_max_retained_purges_the_oldest_batch_by_lowest_id(
    ledger_factory: Callable[..., Ledger], damaged: bool
) -> None:
    # r03, r01 and r02 end together, then three more, then one: the seventh ended record
    # purges one of the oldest three, the same one in both modes (ties: the lowest id).
    # Found as a record purged in one mode only, and (r03 corrupt: the reference path
    # took r03 for the oldest and dropped only its index entry) as a total of 6 vs 7.
    ledger = ledger_factory(max_retained=6)
    claims = _claimed(ledger, ["r00", "r01", "r02", "r03", "r04", "r05", "r06"])
    ledger.settle_many([(claims[i], State.COMPLETED) for i in ("r03", "r01", "r02")])
    advance(ledger, 1000)
    ledger.settle_many([(claims[i], State.COMPLETED) for i in ("r00", "r05", "r06")])
    if damaged:
        corrupt(ledger, "r03")
    advance(ledger, 1000)
    assert ledger.settle(claims["r04"]).ok
    assert ledger.resolve("r01") is None
    assert raw(ledger, "r03") is not None
    assert all(ledger.resolve(i) for i in ("r00", "r02", "r04", "r05", "r06"))
    assert ledger.stats().total == 6


def test_trim_drops_a_corrupt_oldest_entry_and_keeps_its_bytes(
    ledger_factory: Callable[..., Ledger],
) -> None:
    # The stats variant of the case above: the oldest is corrupt, so only its index
    # entry goes; its bytes stay for repair to quarantine and still count in the total.
    ledger = ledger_factory(max_retained=2)
    claims = _claimed(ledger, ["a", "b", "c"])
    assert ledger.settle(claims["a"]).ok
    advance(ledger, 1000)
    assert ledger.settle(claims["b"]).ok
    corrupt(ledger, "a")
    advance(ledger, 1000)
    assert ledger.settle(claims["c"]).ok
    assert indexes_of(ledger, "a") == {}
    assert raw(ledger, "a") is not None
    assert ledger.stats().total == 3
    report = repair_all(ledger)
    assert (report.quarantined, report.purged) == (1, 0)


def test_batch_answers_every_item_before_it_trims(
    ledger_factory: Callable[..., Ledger],
) -> None:
    # Found as 'not_claimed' != 'missing': the optimized batch purges the ended records
    # it pushes past max_retained after it has answered every item, the reference path
    # purged after each item, so a later item of the batch found its record gone.
    ledger = ledger_factory(max_retained=1)
    claims = _claimed(ledger, ["a", "b"])
    assert ledger.settle(claims["a"]).ok
    advance(ledger, 1000)
    answers = ledger.settle_many(
        [
            (claims["b"], State.COMPLETED),
            (claims["a"], State.PENDING),
            (claims["a"], State.COMPLETED),
        ]
    )
    assert answers[0].status is SettlementStatus.SETTLED
    assert (answers[1].status, answers[1].reason) == (SettlementStatus.LOST, "not_claimed")
    # A replay of the settlement that ended a: answered as settled, as it is alone.
    assert answers[2].status is SettlementStatus.SETTLED
    assert ledger.resolve("a") is None  # then the batch purged the oldest
    assert ledger.resolve("b") is not None


def test_repair_counts_a_purge_only_for_a_record_that_went(
    ledger_factory: Callable[..., Ledger],
) -> None:
    # Found as {'purged': 8} != {'purged': 7}: repair's trim past max_retained counted a
    # corrupt ended record's index entry as a purge, though the record stays (repair
    # quarantines it); which record is the oldest decided whether a mode counted it.
    ledger = ledger_factory(max_retained=1)
    ledger.close_gate()
    now = ledger.server_time_ms()
    for request_id, ended in (("a", now - 2000), ("b", now - 1000)):
        admission = ledger.import_record(request_id, "p", State.COMPLETED, ended, updated_at=ended)
        assert admission.status.value == "ADMITTED"
    corrupt(ledger, "a")
    report = repair_all(ledger)
    assert (report.quarantined, report.purged) == (1, 0)
    assert ledger.resolve("b") is not None
    # Past retention, what is left goes, and is counted once.
    advance(ledger, 8 * 24 * HOUR_MS)
    assert repair_all(ledger).purged == 1
    assert ledger.resolve("b") is None
