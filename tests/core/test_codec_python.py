"""Properties of the record encoding's Python codec (``records.py``).

Every record round-trips exactly; what the format cannot hold (lone surrogates, fields
out of range) is refused with a clear error; every single-byte change, truncation,
appended byte and foreign request id is detected, and garbage is corrupt, never a crash.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from django_ledger import CorruptRecord, Record, State
from django_ledger.core.records import decode_record, encode_record
from tests.core.test_codec import ANY_TEXT, NOTABLE_PAYLOADS, records


@given(records())
@example(Record("id", "\x00\n🎉\U0010ffff", State.CLAIMED, 0, "w:1", 1, 1, 2**53, 0, 0, None))
def test_every_record_round_trips_exactly(record: Record) -> None:
    raw = encode_record(record)
    assert decode_record(record.request_id, raw) == record
    # The encoding is canonical: encoding the decoded record gives the same bytes.
    assert encode_record(decode_record(record.request_id, raw)) == raw


@pytest.mark.parametrize("payload", NOTABLE_PAYLOADS)
def test_notable_payloads_round_trip(payload: str) -> None:
    record = Record("r-1", payload, State.PENDING, 1, created_at=1, updated_at=1)
    assert decode_record("r-1", encode_record(record)).payload == payload


@pytest.mark.parametrize("field", ["payload", "owner", "request_id"])
@pytest.mark.parametrize("surrogate", ["\ud800", "\udfff", "ok\udc80ok"])
def test_lone_surrogates_are_refused_with_a_clear_error(field: str, surrogate: str) -> None:
    record = replace(Record("r-1", "p", State.PENDING, 0), **{field: surrogate})
    with pytest.raises(ValueError, match="not UTF-8"):
        encode_record(record)


@pytest.mark.parametrize(
    "change",
    [
        {"due_at": -1},
        {"due_at": 2**53 + 1},
        {"attempts": 2**64},
        {"fence": -5},
        {"updated_at": 2**53 + 1},
        {"owner": "o" * 257},
        {"owner": "é" * 129},
        {"lease_until": 5},  # a lease on a PENDING record
        {"state": State.CLAIMED},  # a CLAIMED record without one
        {"state": State.CLAIMED, "lease_until": 0},
    ],
)
def test_what_the_format_cannot_hold_is_refused(change: dict[str, Any]) -> None:
    record = replace(Record("r-1", "p", State.PENDING, 0), **change)
    with pytest.raises(ValueError):
        encode_record(record)


@settings(max_examples=300)
@given(records(), st.data())
def test_every_single_byte_change_is_detected(record: Record, data: st.DataObject) -> None:
    raw = encode_record(record)
    position = data.draw(st.integers(0, len(raw) - 1), label="position")
    value = data.draw(st.integers(0, 255).filter(lambda v: v != raw[position]), label="value")
    changed = raw[:position] + bytes([value]) + raw[position + 1 :]
    with pytest.raises(CorruptRecord) as caught:
        decode_record(record.request_id, changed)
    assert caught.value.request_id == record.request_id


def test_every_single_byte_change_of_one_record_is_detected_exhaustively() -> None:
    record = Record(
        "order-1",
        "a\x00b\n🎉\U0001f600",
        State.CLAIMED,
        1_764_493_200_000,
        "worker:1",
        3,
        7,
        1_764_493_230_000,
        1_764_493_100_000,
        1_764_493_200_500,
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    )
    raw = encode_record(record)
    undetected = []
    for position in range(len(raw)):
        for value in range(256):
            if value == raw[position]:
                continue
            changed = raw[:position] + bytes([value]) + raw[position + 1 :]
            try:
                decode_record(record.request_id, changed)
            except CorruptRecord:
                continue
            undetected.append((position, value))
    assert undetected == []


@given(records(), ANY_TEXT.filter(bool))
def test_bytes_under_another_request_id_are_corrupt(record: Record, other: str) -> None:
    if other == record.request_id:
        other += "x"
    with pytest.raises(CorruptRecord):
        decode_record(other, encode_record(record))


@given(records(), st.data())
def test_truncation_is_detected(record: Record, data: st.DataObject) -> None:
    raw = encode_record(record)
    cut = data.draw(st.integers(0, len(raw) - 1), label="kept bytes")
    with pytest.raises(CorruptRecord):
        decode_record(record.request_id, raw[:cut])


@given(records(), st.binary(min_size=1, max_size=8))
def test_appended_bytes_are_detected(record: Record, tail: bytes) -> None:
    with pytest.raises(CorruptRecord):
        decode_record(record.request_id, encode_record(record) + tail)


@pytest.mark.parametrize(
    "raw",
    [b"", b"1", b"1:", b"2:00000000:P", b"1:zzzzzzzz:P:1::0:0:0:0:0:0:", b"\xff" * 40],
)
def test_garbage_is_corrupt_not_a_crash(raw: bytes) -> None:
    with pytest.raises(CorruptRecord):
        decode_record("r-1", raw)
