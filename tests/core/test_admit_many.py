"""admit_many: input order, transport batches, and reconciliation of a cut-off call."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
import redis

from django_ledger import MAX_BATCH, MAX_BATCH_BYTES, AdmissionStatus, Ledger, State
from tests.support.ledger_helpers import TRACEPARENT, count_calls, dump, index, namespace_keys

pytest_plugins = ["tests.support.ledger_fixtures"]

ADMITTED = AdmissionStatus.ADMITTED
DUPLICATE = AdmissionStatus.DUPLICATE
CONFLICT = AdmissionStatus.CONFLICT
REJECTED = AdmissionStatus.REJECTED
FULL = AdmissionStatus.FULL
MIB = 1024 * 1024


def test_limits_are_the_contract() -> None:
    assert MAX_BATCH == 128
    assert MAX_BATCH_BYTES == 2 * MIB


def test_results_in_input_order_with_a_mix_of_statuses(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(max_records=5, max_payload_bytes=8)
    ledger.admit("old", "p")
    ledger.admit("clash", "p")
    requests = [
        ("new-1", "p"),
        ("", "p"),
        ("old", "p"),
        ("clash", "other"),
        ("big", "x" * 9),
        ("new-2", "p"),
        ("bad\x01id", "p"),
        ("new-3", "p"),
        ("one-too-many", "p"),
        ("new-1", "p"),
        ("new-2", "else"),
    ]
    answers = ledger.admit_many(requests)
    assert [(a.request_id, a.status, a.reason) for a in answers] == [
        ("new-1", ADMITTED, None),
        ("", REJECTED, "id_empty"),
        ("old", DUPLICATE, None),
        ("clash", CONFLICT, "payload_differs"),
        ("big", REJECTED, "payload_too_large"),
        ("new-2", ADMITTED, None),
        ("bad\x01id", REJECTED, "id_control_character"),
        ("new-3", ADMITTED, None),
        ("one-too-many", FULL, "max_records"),
        ("new-1", DUPLICATE, None),
        ("new-2", CONFLICT, "payload_differs"),
    ]
    for answer in answers:
        if answer.status is ADMITTED:
            assert answer.record == ledger.resolve(answer.request_id)
    assert set(index(ledger, ledger.ready_key)) == {"old", "clash", "new-1", "new-2", "new-3"}


def test_duplicates_within_one_call(ledger: Ledger) -> None:
    answers = ledger.admit_many([("a", "x"), ("b", "x"), ("a", "x"), ("b", "y"), ("a", "z")])
    assert [a.status for a in answers] == [ADMITTED, ADMITTED, DUPLICATE, CONFLICT, CONFLICT]
    record = ledger.resolve("a")
    assert record is not None
    assert record.payload == "x"
    assert answers[2].record == record


def test_duplicate_across_a_batch_boundary(ledger: Ledger) -> None:
    requests = [(f"id-{n}", "p") for n in range(MAX_BATCH)] + [("id-0", "p"), ("id-1", "q")]
    answers = ledger.admit_many(requests)
    assert [a.status for a in answers[:MAX_BATCH]] == [ADMITTED] * MAX_BATCH
    assert [a.status for a in answers[MAX_BATCH:]] == [DUPLICATE, CONFLICT]


def test_delay_and_traceparent_apply_to_every_item(ledger: Ledger) -> None:
    before = ledger.server_time_ms()
    answers = ledger.admit_many(
        [("a", "p"), ("b", "q")], delay=timedelta(seconds=30), traceparent=TRACEPARENT
    )
    after = ledger.server_time_ms()
    assert [a.status for a in answers] == [ADMITTED, ADMITTED]
    for request_id in ("a", "b"):
        record = ledger.resolve(request_id)
        assert record is not None
        assert record.traceparent == TRACEPARENT
        assert before + 30_000 <= record.due_at <= after + 30_000
        assert record.state is State.PENDING


def test_accepts_any_iterable_of_pairs(ledger: Ledger) -> None:
    answers = ledger.admit_many((f"g{n}", str(n)) for n in range(3))
    assert [a.status for a in answers] == [ADMITTED] * 3
    assert [a.status for a in ledger.admit_many([["g0", "0"]])] == [DUPLICATE]  # type: ignore[list-item]
    assert ledger.admit_many([]) == []


def test_invalid_traceparent_rejects_every_item(
    ledger: Ledger, redis_client: redis.Redis, namespace: str
) -> None:
    answers = ledger.admit_many([("a", "p"), ("b", "p")], traceparent="nope")
    assert [(a.status, a.reason) for a in answers] == [(REJECTED, "traceparent_invalid")] * 2
    assert namespace_keys(redis_client, namespace) == set()


@pytest.mark.parametrize(
    "bad",
    [("only-one",), ("a", "b", "c"), "ab", None, ("id", 5), (5, "p"), {"id": "p"}],
)
def test_one_malformed_item_writes_nothing_of_the_call(
    ledger: Ledger, redis_client: redis.Redis, namespace: str, bad: object
) -> None:
    requests = [("first", "p"), bad, ("last", "p")]
    with pytest.raises(TypeError):
        ledger.admit_many(requests)  # type: ignore[arg-type]
    assert namespace_keys(redis_client, namespace) == set()


def test_bad_delay_writes_nothing(
    ledger: Ledger, redis_client: redis.Redis, namespace: str
) -> None:
    with pytest.raises(ValueError, match="delay"):
        ledger.admit_many([("a", "p")], delay=-5)
    with pytest.raises(TypeError, match="delay"):
        ledger.admit_many([("a", "p")], delay="5")  # type: ignore[arg-type]
    assert namespace_keys(redis_client, namespace) == set()


# -- transport batches (counted on the server) --------------------------------------------


def test_129_items_take_two_script_calls(ledger: Ledger, redis_client: redis.Redis) -> None:
    requests = [(f"item-{n:03}", f"payload {n}") for n in range(MAX_BATCH + 1)]
    with count_calls(redis_client) as calls:
        answers = ledger.admit_many(requests)
    assert [a.status for a in answers] == [ADMITTED] * (MAX_BATCH + 1)
    assert [a.request_id for a in answers] == [request_id for request_id, _ in requests]
    assert redis_client.hlen(ledger.records_key) == MAX_BATCH + 1
    if ledger.optimized:
        assert calls.fcall == 2


def test_128_items_take_one_script_call(ledger: Ledger, redis_client: redis.Redis) -> None:
    requests = [(f"item-{n:03}", "p") for n in range(MAX_BATCH)]
    with count_calls(redis_client) as calls:
        answers = ledger.admit_many(requests)
    assert [a.status for a in answers] == [ADMITTED] * MAX_BATCH
    if ledger.optimized:
        assert calls.fcall == 1


def _two_items(total: int, id_chars: str = "a") -> list[tuple[str, str]]:
    """Two requests whose ids and payloads add up to ``total`` UTF-8 bytes."""
    first_id, second_id = id_chars + "1", id_chars + "2"
    id_bytes = len(first_id.encode()) + len(second_id.encode())
    first = MIB - len(first_id.encode())
    second = total - id_bytes - first
    return [(first_id, "x" * first), (second_id, "y" * second)]


@pytest.mark.parametrize(("total", "batches"), [(2 * MIB, 1), (2 * MIB + 1, 2)])
def test_two_mib_of_ids_and_payloads_is_one_batch_and_one_byte_more_is_two(
    ledger: Ledger, redis_client: redis.Redis, total: int, batches: int
) -> None:
    requests = _two_items(total)
    assert sum(len(i.encode()) + len(p.encode()) for i, p in requests) == total
    with count_calls(redis_client) as calls:
        answers = ledger.admit_many(requests)
    assert [a.status for a in answers] == [ADMITTED, ADMITTED]
    stored = ledger.resolve_many([i for i, _ in requests])
    assert [r.payload if r else None for r in stored] == [p for _, p in requests]
    if ledger.optimized:
        assert calls.fcall == batches


def test_multibyte_ids_count_in_bytes_toward_a_batch(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    # Two ids of 128 characters (255 UTF-8 bytes each) and payloads that bring the
    # UTF-8 total to 2 MiB + 1: two batches, though the character count is under 2 MiB.
    first_id, second_id = "é" * 127 + "1", "é" * 127 + "2"
    first = "x" * MIB
    second = "y" * (2 * MIB + 1 - MIB - len(first_id.encode()) - len(second_id.encode()))
    requests = [(first_id, first), (second_id, second)]
    assert sum(len(i.encode()) + len(p.encode()) for i, p in requests) == 2 * MIB + 1
    with count_calls(redis_client) as calls:
        answers = ledger.admit_many(requests)
    assert [a.status for a in answers] == [ADMITTED, ADMITTED]
    if ledger.optimized:
        assert calls.fcall == 2


def test_many_small_items_split_by_count_then_by_bytes(
    ledger_factory: Callable[..., Ledger], redis_client: redis.Redis
) -> None:
    ledger = ledger_factory(max_payload_bytes=MIB)
    # 300 items: three batches by count (128 + 128 + 44).
    with count_calls(redis_client) as calls:
        answers = ledger.admit_many([(f"n{n}", "p") for n in range(300)])
    assert len(answers) == 300
    assert {a.status for a in answers} == {ADMITTED}
    if ledger.optimized:
        assert calls.fcall == 3


def test_rejected_items_do_not_travel(ledger: Ledger, redis_client: redis.Redis) -> None:
    requests = [("", "p")] * 200 + [("ok", "p")]
    with count_calls(redis_client) as calls:
        answers = ledger.admit_many(requests)
    assert [a.status for a in answers] == [REJECTED] * 200 + [ADMITTED]
    if ledger.optimized:
        assert calls.fcall == 1


# -- a call cut off midway ----------------------------------------------------------------


@pytest.mark.parametrize("prefix", [0, 1, 60, 128, 129])
def test_cut_off_call_reconciles(ledger: Ledger, prefix: int) -> None:
    requests = [(f"job-{n:03}", f"payload {n}") for n in range(129)]
    # What an interrupted call may have persisted: some prefix of the items.
    first = ledger.admit_many(requests[:prefix])
    assert [a.status for a in first] == [ADMITTED] * prefix
    stored = {r.request_id: r for r in ledger.resolve_many(i for i, _ in requests[:prefix]) if r}

    again = ledger.admit_many(requests)
    assert [a.status for a in again] == [DUPLICATE] * prefix + [ADMITTED] * (129 - prefix)
    # The prefix is untouched: same records, same due times.
    for answer in again[:prefix]:
        assert answer.record == stored[answer.request_id]
    before = dump(ledger)

    third = ledger.admit_many(requests)
    assert [a.status for a in third] == [DUPLICATE] * 129
    assert dump(ledger) == before
    # Each id was ADMITTED exactly once over the three calls.
    admitted = [
        a.request_id for call in (first, again, third) for a in call if a.status is ADMITTED
    ]
    assert sorted(admitted) == [i for i, _ in requests]
    assert len(index(ledger, ledger.ready_key)) == 129
