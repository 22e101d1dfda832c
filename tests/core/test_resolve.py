"""resolve and resolve_many: verified records, None for the unknown, corrupt named."""

from __future__ import annotations

import pytest
import redis

from django_ledger import CorruptRecord, Ledger, LedgerError, Record, State
from tests.support.ledger_helpers import TRACEPARENT, corrupt, count_calls, fused_twin, raw

pytest_plugins = ["tests.support.ledger_fixtures"]


def test_missing_is_none(ledger: Ledger) -> None:
    assert ledger.resolve("nope") is None


def test_resolve_returns_the_verified_record(ledger: Ledger) -> None:
    admission = ledger.admit("a", "payload ✓", delay=5, traceparent=TRACEPARENT)
    record = ledger.resolve("a")
    assert isinstance(record, Record)
    assert record == admission.record
    assert (record.request_id, record.payload, record.state) == ("a", "payload ✓", State.PENDING)
    assert record.traceparent == TRACEPARENT
    assert record.due_at == record.created_at + 5_000


def test_resolve_follows_the_record_through_its_states(ledger: Ledger) -> None:
    ledger.admit("a", "p")
    claim = ledger.claim("w")
    assert claim is not None
    claimed = ledger.resolve("a")
    assert claimed is not None
    assert (claimed.state, claimed.owner, claimed.lease_until) == (
        State.CLAIMED,
        "w",
        claim.lease_until,
    )
    ledger.settle(claim)
    done = ledger.resolve("a")
    assert done is not None
    assert done.state is State.COMPLETED


def test_corrupt_record_raises_naming_the_id(ledger: Ledger) -> None:
    ledger.admit("broken id", "p")
    corrupt(ledger, "broken id")
    with pytest.raises(CorruptRecord) as caught:
        ledger.resolve("broken id")
    assert caught.value.request_id == "broken id"
    assert "broken id" in str(caught.value)
    assert isinstance(caught.value, LedgerError)


def test_flipped_byte_raises(ledger: Ledger) -> None:
    ledger.admit("a", "some payload")
    stored = raw(ledger, "a")
    assert stored is not None
    for position in (0, len(stored) // 2, len(stored) - 1):
        changed = bytearray(stored)
        changed[position] ^= 0x20
        ledger.redis.hset(ledger.records_key, "a", bytes(changed))
        with pytest.raises(CorruptRecord) as caught:
            ledger.resolve("a")
        assert caught.value.request_id == "a"


def test_bytes_copied_under_another_id_are_corrupt(ledger: Ledger) -> None:
    ledger.admit("a", "p")
    stored = raw(ledger, "a")
    ledger.redis.hset(ledger.records_key, "b", stored)  # type: ignore[arg-type]
    with pytest.raises(CorruptRecord) as caught:
        ledger.resolve("b")
    assert caught.value.request_id == "b"


def test_resolve_many_in_input_order_with_none(ledger: Ledger) -> None:
    ledger.admit_many([("a", "pa"), ("b", "pb")])
    records = ledger.resolve_many(["b", "missing", "a", "b"])
    assert [r.payload if r else None for r in records] == ["pb", None, "pa", "pb"]
    assert ledger.resolve_many([]) == []
    assert [r.request_id for r in ledger.resolve_many(iter(["a"])) if r] == ["a"]


def test_resolve_many_corrupt_names_the_id(ledger: Ledger) -> None:
    ledger.admit_many([("a", "p"), ("b", "p"), ("c", "p")])
    corrupt(ledger, "b")
    with pytest.raises(CorruptRecord) as caught:
        ledger.resolve_many(["a", "b", "c"])
    assert caught.value.request_id == "b"
    assert ledger.resolve_many(["a", "c"])[1] is not None


def test_resolve_many_of_more_than_1000_ids(ledger: Ledger, redis_client: redis.Redis) -> None:
    ids = [f"id-{n:04}" for n in range(2500)]
    fused_twin(ledger).admit_many((i, f"p{i}") for i in ids[::2])  # every other one exists
    with count_calls(redis_client) as calls:
        records = ledger.resolve_many(ids)
    assert len(records) == 2500
    for n, record in enumerate(records):
        if n % 2:
            assert record is None
        else:
            assert record is not None
            assert (record.request_id, record.payload) == (ids[n], f"p{ids[n]}")
    # Not a round trip per id.
    assert sum(calls.by_command.values()) <= 3


@pytest.mark.parametrize(
    ("request_id", "error"),
    [
        ("", ValueError),
        ("x" * 257, ValueError),
        ("a\nb", ValueError),
        (1, TypeError),
        (None, TypeError),
    ],
)
def test_bad_ids(ledger: Ledger, request_id: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        ledger.resolve(request_id)  # type: ignore[arg-type]
    with pytest.raises(error):
        ledger.resolve_many(["ok", request_id])  # type: ignore[list-item]
