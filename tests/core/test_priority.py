"""Priority: among records due now a higher priority is claimed first, then due order.

One ready index holds every priority (score ``due_at - priority * 2**43``); a claim walks
the bands in use, so it stays one script call. Both modes, and the version-2 record bytes
that carry a priority.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from django_ledger import CorruptRecord, Ledger, Record, State
from django_ledger.core.records import PRIORITY_STEP, decode_record, encode_record
from tests.support.ledger_helpers import advance, count_calls, index, repair_all

pytest_plugins = ["tests.support.ledger_fixtures"]


def test_two_hundred_mixed_priorities_claim_in_priority_then_fifo_order(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(max_records=1_000)
    rng = random.Random(7)
    enqueued: list[tuple[int, str]] = []
    for n in range(200):
        priority = rng.choice([-100, -5, 0, 0, 3, 50, 100])
        # Ids sort against enqueue order: ids must not decide the order, due times do.
        request_id = f"task-{999 - n:03d}"
        assert ledger.admit(request_id, "p", priority=priority).status.value == "ADMITTED"
        enqueued.append((priority, request_id))
        advance(ledger, 1)
    expected = [rid for _, rid in sorted(enqueued, key=lambda item: -item[0])]  # stable: FIFO
    claims = ledger.claim_many("w", 200)
    assert [claim.request_id for claim in claims] == expected


def test_a_claim_is_one_script_call_whatever_the_bands(
    ledger_factory: Callable[..., Ledger], redis_client: object
) -> None:
    ledger = ledger_factory()
    if not ledger.optimized:
        pytest.skip("the reference path reads and writes in several calls by design")
    for priority in (-100, -1, 0, 1, 100):
        ledger.admit(f"p{priority}", "x", priority=priority)
    with count_calls(ledger.redis) as counted:
        claims = ledger.claim_many("w", 5)
    assert [c.request_id for c in claims] == ["p100", "p1", "p0", "p-1", "p-100"]
    assert counted.fcall == 1


def test_a_later_high_priority_record_does_not_hold_back_due_ones(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory()
    ledger.admit("urgent-later", "x", delay=60, priority=100)
    ledger.admit("normal-now", "x")
    ledger.admit("low-now", "x", priority=-50)
    stats = ledger.stats()
    assert (stats.pending_due, stats.pending_later) == (2, 1)
    assert [c.request_id for c in ledger.claim_many("w", 5)] == ["normal-now", "low-now"]
    advance(ledger, 61_000)
    assert ledger.stats().pending_due == 1
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "urgent-later"


def test_priority_survives_retry_and_repair(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory()
    ledger.admit("keep", "x", priority=42)
    claim = ledger.claim("w", lease=1)
    assert claim is not None
    assert ledger.settle(claim, State.PENDING).ok
    record = ledger.resolve("keep")
    assert record is not None and record.priority == 42
    assert index(ledger, ledger.ready_key) == {"keep": record.due_at - 42 * PRIORITY_STEP}
    claim = ledger.claim("w", lease=1)
    assert claim is not None
    advance(ledger, 2_000)
    assert repair_all(ledger).expired == 1
    record = ledger.resolve("keep")
    assert record is not None and (record.state, record.priority) == (State.PENDING, 42)
    assert index(ledger, ledger.ready_key) == {"keep": record.due_at - 42 * PRIORITY_STEP}


@pytest.mark.parametrize("bad", [101, -101, 1000])
def test_a_priority_out_of_range_is_refused_before_any_write(
    ledger_factory: Callable[..., Ledger], bad: int
) -> None:
    ledger = ledger_factory()
    with pytest.raises(ValueError, match="priority must be from -100 to 100"):
        ledger.admit("x", "p", priority=bad)
    with pytest.raises(TypeError, match="priority must be an int"):
        ledger.admit("x", "p", priority=1.5)  # type: ignore[arg-type]
    assert ledger.stats().total == 0


def test_priority_zero_keeps_version_one_bytes(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory()
    ledger.admit("plain", "p")
    ledger.admit("urgent", "p", priority=9)
    raws = ledger.redis.hmget(ledger.records_key, ["plain", "urgent"])
    assert [raw[:1] for raw in raws] == [b"1", b"2"]
    assert decode_record("urgent", raws[1]).priority == 9


PRIORITIES = st.integers(-100, 100).filter(bool)


@given(priority=PRIORITIES, payload=st.text(max_size=40), owner=st.text(max_size=8))
def test_version_two_round_trips(priority: int, payload: str, owner: str) -> None:
    if any(0xD800 <= ord(c) <= 0xDFFF for c in payload + owner):
        return
    record = Record(
        "id-1", payload, State.PENDING, 1_764_493_200_000, owner=owner, priority=priority
    )
    assert decode_record("id-1", encode_record(record)) == record


@given(priority=PRIORITIES, data=st.data())
def test_every_single_byte_change_of_version_two_is_detected(
    priority: int, data: st.DataObject
) -> None:
    raw = encode_record(Record("id-1", "payload", State.PENDING, 1_000, priority=priority))
    at = data.draw(st.integers(0, len(raw) - 1), label="offset")
    value = data.draw(st.integers(0, 255).filter(lambda b: b != raw[at]), label="byte")
    changed = raw[:at] + bytes([value]) + raw[at + 1 :]
    with pytest.raises(CorruptRecord):
        decode_record("id-1", changed)


def test_the_version_byte_is_bound_into_the_checksum() -> None:
    one = encode_record(Record("id-1", "\x05payload", State.PENDING, 1_000))
    two = encode_record(Record("id-1", "payload", State.PENDING, 1_000, priority=5))
    for raw, flipped in ((one, b"2" + one[1:]), (two, b"1" + two[1:])):
        assert decode_record("id-1", raw)
        with pytest.raises(CorruptRecord):
            decode_record("id-1", flipped)


def test_lua_and_python_read_the_same_version_two_bytes(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory()
    # Written by Python (import), read and rewritten by Lua (claim), read by Python.
    ledger.close_gate()
    now = ledger.server_time_ms()
    ledger.import_record("moved", "café ☕", State.PENDING, now - 1, priority=-7)
    ledger.open_gate()
    claim = ledger.claim("wörker")
    assert claim is not None and claim.payload == "café ☕"
    record = ledger.resolve("moved")
    assert record is not None and (record.priority, record.owner) == (-7, "wörker")
    assert ledger.redis.hget(ledger.records_key, "moved")[:1] == b"2"
