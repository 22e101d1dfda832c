"""Repair never acts on a stale pass: a newer claim, settlement, admission or restored
bytes stand, whatever page the scan is on. Both modes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis

from django_ledger import AdmissionStatus, Ledger, SettlementStatus, State
from tests.core.test_repair import MakeLedger, advance, cycle, done, index_entries, stored


@pytest.fixture(params=[True, False], ids=["optimized", "reference"])
def make_ledger(
    request: pytest.FixtureRequest, redis_client: redis.Redis, namespace: str
) -> MakeLedger:
    def make(queue: str = "q", **options: Any) -> Ledger:
        return Ledger(redis_client, namespace, queue, optimized=request.param, **options)

    return make


def test_a_stale_repair_cannot_overwrite_a_newer_claim(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    ledger.admit("job", "p")
    old = stored(ledger, "job")  # PENDING, as a repair pass reads it
    claim = ledger.claim("w")
    assert claim is not None
    newer = stored(ledger, "job")

    report = ledger.repair_records([("job", old)])
    done(report, stale=1)
    assert report.scanned == 1
    assert stored(ledger, "job") == newer
    assert index_entries(ledger)["ready"] == {}
    assert index_entries(ledger)["leases"] == {"job": claim.lease_until}
    assert ledger.settle(claim).status is SettlementStatus.SETTLED


def test_a_stale_repair_cannot_return_a_lease_that_was_settled(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    ledger.admit("job", "p")
    claim = ledger.claim("w", lease=30)
    assert claim is not None
    old = stored(ledger, "job")  # CLAIMED, as a repair pass reads it
    assert ledger.settle(claim).status is SettlementStatus.SETTLED
    advance(ledger, 60_000)  # the old bytes' lease has lapsed by now
    done(ledger.repair_records([("job", old)]), stale=1)
    record = ledger.resolve("job")
    assert record is not None and record.state is State.COMPLETED


def test_a_stale_repair_cannot_take_back_a_newer_claim_of_an_expired_record(
    make_ledger: MakeLedger,
) -> None:
    ledger = make_ledger()
    ledger.admit("job", "p")
    first = ledger.claim("w1", lease=10)
    assert first is not None
    advance(ledger, 11_000)
    expired = stored(ledger, "job")  # what a slow repair pass read
    done(cycle(ledger), expired=1)  # a faster pass returned it
    newer = ledger.claim("w2", lease=60)
    assert newer is not None and newer.fence == first.fence + 1
    done(ledger.repair_records([("job", expired)]), stale=1)
    record = ledger.resolve("job")
    assert record is not None and (record.state, record.owner, record.fence) == (
        State.CLAIMED,
        "w2",
        newer.fence,
    )
    assert ledger.renew(newer).status is SettlementStatus.RENEWED


def test_a_stale_repair_cannot_purge_a_readmitted_record(make_ledger: MakeLedger) -> None:
    ledger = make_ledger(retention=timedelta(minutes=1))
    ledger.admit("job", "p")
    claim = ledger.claim("w")
    assert claim is not None
    ledger.settle(claim)
    advance(ledger, 61_000)
    old = stored(ledger, "job")  # COMPLETED past retention
    done(cycle(ledger), purged=1)
    assert ledger.admit("job", "p").status is AdmissionStatus.ADMITTED
    done(ledger.repair_records([("job", old)]), stale=1)
    record = ledger.resolve("job")
    assert record is not None and record.state is State.PENDING


def test_a_stale_repair_cannot_quarantine_restored_bytes(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    ledger.admit("job", "p")
    good = stored(ledger, "job")
    ledger.redis.hset(ledger.records_key, "job", b"broken")
    # An operator restores the good bytes after a pass read the broken ones.
    ledger.redis.hset(ledger.records_key, "job", good)
    done(ledger.repair_records([("job", b"broken")]), stale=1)
    assert ledger.redis.hlen(ledger.quarantine_key) == 0
    assert ledger.resolve("job") is not None
    assert index_entries(ledger)["ready"] == {"job": ledger.resolve("job").due_at}  # type: ignore[union-attr]


def test_repair_of_a_record_that_is_gone_is_stale(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    ledger.admit("job", "p")
    old = stored(ledger, "job")
    ledger.redis.hdel(ledger.records_key, "job")
    done(ledger.repair_records([("job", old)]), stale=1)
    assert ledger.redis.hget(ledger.records_key, "job") is None


def test_an_expired_lease_is_returned_by_the_first_page_wherever_the_scan_stands(
    make_ledger: MakeLedger,
) -> None:
    ledger = make_ledger()
    ledger.admit_many([(f"later-{i:03d}", "x" * 40) for i in range(300)], delay=timedelta(hours=1))
    ledger.admit("job", "p")
    claim = ledger.claim("w", lease=10)
    assert claim is not None and claim.request_id == "job"
    advance(ledger, 11_000)

    report = ledger.repair_page("0", 10)  # one small page of a 301-record hash
    assert report.expired == 1 and report.cursor != "0"
    record = ledger.resolve("job")
    assert record is not None and record.state is State.PENDING


def test_bytes_put_right_after_quarantine_are_back_in_service(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    ledger.admit("job", "p")
    good = ledger.redis.hget(ledger.records_key, "job")
    assert good is not None
    ledger.redis.hset(ledger.records_key, "job", good[:-1] + bytes([good[-1] ^ 1]))
    assert cycle(ledger).quarantined == 1
    assert ledger.claim("w") is None  # quarantined: out of the index, out of service

    ledger.redis.hset(ledger.records_key, "job", good)  # an operator puts the bytes right
    assert cycle(ledger).reindexed == 1
    assert ledger.redis.hexists(ledger.quarantine_key, "job") == 0
    assert ledger.stats().quarantined == 0
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "job"


@pytest.mark.parametrize(
    "cursor", ["18446744073709551616", "99999999999999999999", 2**64, "\u00b2"]
)
def test_a_cursor_past_64_bits_is_refused_before_anything_is_written(
    make_ledger: Callable[..., Ledger], redis_client: redis.Redis, cursor: str | int
) -> None:
    ledger = make_ledger()
    ledger.admit("a", "x")
    before = {key: redis_client.dump(key) for key in ledger.keys}
    with pytest.raises(ValueError, match="cursor must be a cursor returned by repair"):
        ledger.repair_page(cursor)
    assert {key: redis_client.dump(key) for key in ledger.keys} == before
    assert ledger.repair_page(str(2**64 - 1)).cursor.isdigit()  # the largest is a cursor
