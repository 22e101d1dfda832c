"""Repair: indexes rebuilt from records, leases taken back, corrupt bytes quarantined,
terminal records purged, and never a stale pass over a newer write. Both modes."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
import redis

from django_ledger import (
    AdmissionStatus,
    CorruptRecord,
    Ledger,
    SettlementStatus,
    State,
)
from django_ledger.core.records import decode_record
from django_ledger.core.results import RepairReport

MakeLedger = Callable[..., Ledger]
HOUR = 3_600_000


@pytest.fixture(params=[True, False], ids=["optimized", "reference"])
def make_ledger(
    request: pytest.FixtureRequest, redis_client: redis.Redis, namespace: str
) -> MakeLedger:
    def make(queue: str = "q", **options: Any) -> Ledger:
        return Ledger(redis_client, namespace, queue, optimized=request.param, **options)

    return make


def stored(ledger: Ledger, request_id: str) -> bytes:
    raw = ledger.redis.hget(ledger.records_key, request_id)
    assert raw is not None, f"{request_id} has no record"
    return bytes(raw)


def cycle(ledger: Ledger, count: int = 100) -> RepairReport:
    """Run one whole repair cycle and add up what it did."""
    total = RepairReport()
    for report in ledger.repair_cycle(count):
        total.add(report)
    assert total.cursor == "0"
    return total


def done(report: RepairReport, **counts: int) -> dict[str, int]:
    """The counts of ``report`` but scanned, to compare with ``counts`` (zero if absent)."""
    got = report.counts()
    del got["scanned"]
    assert got == {name: counts.get(name, 0) for name in got}
    return got


def index_entries(ledger: Ledger) -> dict[str, dict[str, int]]:
    names = {
        "ready": ledger.ready_key,
        "leases": ledger.leases_key,
        **{state.value: key for state, key in ledger.terminal_keys.items()},
    }
    return {
        name: {
            member.decode(): int(score)
            for member, score in ledger.redis.zrange(key, 0, -1, withscores=True)
        }
        for name, key in names.items()
    }


def derived_entries(ledger: Ledger) -> dict[str, dict[str, int]]:
    """The indexes the decodable, unquarantined records call for."""
    expected: dict[str, dict[str, int]] = {name: {} for name in index_entries(ledger)}
    for key, raw in ledger.redis.hgetall(ledger.records_key).items():
        try:
            record = decode_record(key.decode(), raw)
        except CorruptRecord:
            continue
        name = {State.PENDING: "ready", State.CLAIMED: "leases"}.get(
            record.state, record.state.value
        )
        score = record.index_score()
        assert score is not None
        expected[name][record.request_id] = score
    return expected


def advance(ledger: Ledger, ms: int) -> None:
    ledger.clock_skew_ms += ms


def one_of_each_state(ledger: Ledger) -> dict[State, str]:
    """Build a record in every state the way users do (needs ``max_attempts=1``)."""
    assert ledger.max_attempts == 1
    ledger.admit("dead", "d")
    assert ledger.claim("w", lease=1) is not None
    advance(ledger, 2_000)
    done(cycle(ledger), dead=1)
    # Admitted in id order: ties in due time are claimed in that order in both modes.
    ledger.admit_many([("claimed", "c"), ("completed", "k"), ("failed", "f"), ("pending", "p")])
    ledger.admit("later", "l", delay=timedelta(hours=2))
    claims = {c.request_id: c for c in ledger.claim_many("w", 3, lease=timedelta(days=1))}
    assert set(claims) == {"claimed", "completed", "failed"}
    assert ledger.settle(claims["completed"]).status is SettlementStatus.SETTLED
    assert ledger.settle(claims["failed"], State.FAILED).status is SettlementStatus.SETTLED
    return {state: state.value.lower() for state in State}


# -- indexes --------------------------------------------------------------------------


def test_lost_index_entries_are_rebuilt(make_ledger: MakeLedger) -> None:
    ledger = make_ledger(max_attempts=1)
    ids = one_of_each_state(ledger)
    for state, request_id in ids.items():
        record = ledger.resolve(request_id)
        assert record is not None and record.state is state
    before = index_entries(ledger)
    assert before == derived_entries(ledger)
    # Lose every index entry but the later one's.
    for key in (ledger.ready_key, ledger.leases_key, *ledger.terminal_keys.values()):
        ledger.redis.zrem(key, *ids.values())
    assert ledger.stats().pending_due == 0
    assert ledger.claim("w") is None  # the index is how claims find records

    report = cycle(ledger)
    done(report, reindexed=5)
    assert report.scanned >= 6
    assert index_entries(ledger) == before
    stats = ledger.stats()
    assert (stats.pending_due, stats.pending_later, stats.claimed) == (1, 1, 1)
    assert (stats.completed, stats.failed, stats.dead) == (1, 1, 1)
    # The rebuilt indexes work, and a second cycle finds nothing to do.
    done(cycle(ledger))
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "pending"


def test_index_entries_that_disagree_with_the_record_are_fixed(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    ledger.admit_many([("a", "1"), ("b", "2"), ("c", "3")])
    claim = ledger.claim("w", lease=60)
    assert claim is not None and claim.request_id in {"a", "b", "c"}
    expected = index_entries(ledger)
    pending = sorted({"a", "b", "c"} - {claim.request_id})
    # A pending record also under leases and completed, one at a wrong score, and
    # the claimed one back in ready.
    ledger.redis.zadd(ledger.leases_key, {pending[0]: 1})
    ledger.redis.zadd(ledger.terminal_keys[State.COMPLETED], {pending[0]: 1})
    ledger.redis.zadd(ledger.ready_key, {pending[1]: 5})
    ledger.redis.zadd(ledger.ready_key, {claim.request_id: 1})
    assert index_entries(ledger) != expected

    done(cycle(ledger), reindexed=3)
    assert index_entries(ledger) == expected == derived_entries(ledger)
    assert ledger.settle(claim).status is SettlementStatus.SETTLED


def test_index_entries_without_a_record_are_removed(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    ledger.admit("real", "p")
    for key in (ledger.ready_key, ledger.leases_key, *ledger.terminal_keys.values()):
        ledger.redis.zadd(key, {"ghost": 1})
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "real"
    cycle(ledger)
    assert all("ghost" not in entries for entries in index_entries(ledger).values())
    stats = ledger.stats()
    assert (stats.pending, stats.claimed, stats.completed, stats.failed, stats.dead) == (
        0,
        1,
        0,
        0,
        0,
    )


# -- leases ---------------------------------------------------------------------------


def test_expired_leases_return_to_pending_then_dead_after_max_attempts(
    make_ledger: MakeLedger,
) -> None:
    ledger = make_ledger(max_attempts=2)
    ledger.admit("job", "p")
    first = ledger.claim("w1", lease=30)
    assert first is not None
    advance(ledger, 29_000)
    done(cycle(ledger))  # not yet expired: nothing to do
    assert ledger.resolve("job").state is State.CLAIMED  # type: ignore[union-attr]
    advance(ledger, 1_000)
    assert ledger.stats().expired_leases == 1

    done(cycle(ledger), expired=1)
    record = ledger.resolve("job")
    assert record is not None
    now = ledger.server_time_ms()
    assert (record.state, record.attempts, record.fence, record.lease_until) == (
        State.PENDING,
        1,
        first.fence,
        None,
    )
    assert now - 5_000 <= record.due_at <= now  # due at once, by the server clock
    assert index_entries(ledger)["ready"] == {"job": record.due_at}
    assert ledger.settle(first).status is SettlementStatus.LOST
    assert ledger.renew(first).status is SettlementStatus.LOST

    second = ledger.claim("w2", lease=30)
    assert second is not None and (second.attempt, second.fence) == (2, first.fence + 1)
    advance(ledger, 31_000)
    done(cycle(ledger), dead=1)
    record = ledger.resolve("job")
    assert record is not None and (record.state, record.attempts, record.fence) == (
        State.DEAD,
        2,
        second.fence,
    )
    assert index_entries(ledger)["DEAD"] == {"job": record.updated_at}
    assert ledger.claim("w3") is None
    assert ledger.settle(second).status is SettlementStatus.LOST
    done(cycle(ledger))
    assert ledger.admit("job", "p").status is AdmissionStatus.DUPLICATE


# -- quarantine -----------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["flip", "garbage", "other_id"])
def test_corrupt_bytes_are_quarantined(make_ledger: MakeLedger, damage: str) -> None:
    ledger = make_ledger()
    ledger.admit_many([("bad", "payload"), ("good", "payload")])
    raw = stored(ledger, "bad")
    if damage == "flip":
        raw = raw[:20] + bytes([raw[20] ^ 0x20]) + raw[21:]
    elif damage == "garbage":
        raw = b"\x00garbage\xff"
    else:
        raw = stored(ledger, "good")  # valid bytes, but of another id
    ledger.redis.hset(ledger.records_key, "bad", raw)
    with pytest.raises(CorruptRecord) as caught:
        ledger.resolve("bad")
    assert caught.value.request_id == "bad"
    # Before repair: admission says corrupt, and a claim skips it.
    admission = ledger.admit("bad", "payload")
    assert (admission.status, admission.reason) == (AdmissionStatus.CONFLICT, "corrupt")

    done(cycle(ledger), quarantined=1)
    assert stored(ledger, "bad") == raw  # the identity is remembered
    assert ledger.redis.hget(ledger.quarantine_key, "bad") == raw
    assert all("bad" not in entries for entries in index_entries(ledger).values())
    admission = ledger.admit("bad", "payload")
    assert (admission.status, admission.reason) == (AdmissionStatus.CONFLICT, "quarantined")
    stats = ledger.stats()
    assert (stats.quarantined, stats.total, stats.pending_due) == (1, 2, 1)
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "good"
    assert ledger.claim("w") is None
    # Once is enough: a second cycle counts nothing new.
    done(cycle(ledger))
    assert ledger.stats().quarantined == 1


def test_claim_skips_corrupt_records_that_repair_has_not_seen(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    ledger.admit("first", "p")
    ledger.admit("second", "p", delay=0.001)
    ledger.redis.hset(ledger.records_key, "first", b"1:00000000:broken")
    advance(ledger, 1_000)
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "second"
    assert stored(ledger, "first") == b"1:00000000:broken"


# -- retention ------------------------------------------------------------------------


def test_terminal_records_are_purged_after_retention(make_ledger: MakeLedger) -> None:
    ledger = make_ledger(max_attempts=1, retention=timedelta(hours=1))
    ids = one_of_each_state(ledger)
    advance(ledger, HOUR - 60_000)
    done(cycle(ledger))  # every terminal record ended about 59 minutes ago
    assert ledger.resolve("completed") is not None
    advance(ledger, 60_000)
    done(cycle(ledger), purged=3)
    for request_id in (ids[State.COMPLETED], ids[State.FAILED], ids[State.DEAD]):
        assert ledger.resolve(request_id) is None
    assert all(
        not entries
        for state, entries in index_entries(ledger).items()
        if state not in ("ready", "leases")
    )
    assert ledger.resolve("pending").state is State.PENDING  # type: ignore[union-attr]
    assert ledger.resolve("later").state is State.PENDING  # type: ignore[union-attr]
    stats = ledger.stats()
    assert (stats.completed, stats.failed, stats.dead, stats.claimed, stats.total) == (
        0,
        0,
        0,
        1,
        3,
    )
    # The identity is forgotten: the same id is a new admission.
    assert ledger.admit("completed", "other payload").status is AdmissionStatus.ADMITTED


def test_nothing_is_purged_within_retention(make_ledger: MakeLedger) -> None:
    ledger = make_ledger(retention=timedelta(days=7))
    ledger.admit("a", "p")
    claim = ledger.claim("w")
    assert claim is not None
    ledger.settle(claim)
    advance(ledger, 7 * 24 * HOUR - 60_000)
    done(cycle(ledger))
    assert ledger.admit("a", "p").status is AdmissionStatus.DUPLICATE
    advance(ledger, 60_000)
    done(cycle(ledger), purged=1)


# -- cycles ---------------------------------------------------------------------------


def test_hscan_pages_end_with_cursor_zero(make_ledger: MakeLedger) -> None:
    ledger = make_ledger()
    ids = [f"job-{i:03d}" for i in range(300)]
    ledger.admit_many([(i, "x" * 40) for i in ids])
    cursor, pages, scanned = "0", 0, 0
    while True:
        report = ledger.repair_page(cursor, count=10)
        pages += 1
        scanned += report.scanned
        assert report.cursor == "0" or report.cursor.isdigit()
        cursor = report.cursor
        if cursor == "0":
            break
        assert pages < 1_000
    assert pages > 2
    assert scanned >= 300
    # repair() is the same walk, answering only the cursor.
    cursor, steps = ledger.repair("0", 50), 1
    while cursor != "0":
        cursor, steps = ledger.repair(cursor, 50), steps + 1
    assert steps > 1


@pytest.mark.parametrize(
    ("cursor", "count", "error"),
    [
        ("abc", 10, ValueError),
        ("-1", 10, ValueError),
        (1.5, 10, TypeError),
        (True, 10, TypeError),
        ("0", 0, ValueError),
        ("0", 10_001, ValueError),
    ],
)
def test_bad_cursor_or_count_is_refused(
    make_ledger: MakeLedger, cursor: Any, count: int, error: type
) -> None:
    with pytest.raises(error):
        make_ledger().repair_page(cursor, count)


def test_repair_cycle_reports_add_up(make_ledger: MakeLedger) -> None:
    ledger = make_ledger(max_attempts=1, retention=timedelta(minutes=5))
    payload = "x" * 40  # records long enough that the hash pages like a big one
    ledger.admit_many([(f"fine-{i:03d}", payload) for i in range(140)], delay=timedelta(hours=1))
    ledger.admit_many([("expire-1", payload), ("expire-2", payload), ("done", payload)])
    claims = {c.request_id: c for c in ledger.claim_many("w", 10, lease=10)}
    assert set(claims) == {"expire-1", "expire-2", "done"}
    ledger.settle(claims["done"])
    ledger.redis.hset(ledger.records_key, "broken", b"not a record")
    ledger.redis.zrem(ledger.ready_key, "fine-007")
    advance(ledger, 6 * 60_000)  # past both leases and the retention of "done"

    reports = list(ledger.repair_cycle(count=20))
    assert len(reports) > 1
    assert [r.cursor == "0" for r in reports] == [False] * (len(reports) - 1) + [True]
    total = RepairReport()
    for report in reports:
        total.add(report)
    assert total.cursor == "0"
    # The first page's sweep purges "done" (past retention) before the scan reaches it.
    assert total.scanned == sum(r.scanned for r in reports) >= 143
    # max_attempts=1: both expired leases end DEAD.
    done(total, dead=2, quarantined=1, purged=1, reindexed=1)
    stats = ledger.stats()
    assert (stats.dead, stats.quarantined, stats.completed, stats.pending_later) == (2, 1, 0, 140)
