"""import_record and import_many: offline migration, only while the gate is closed."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import redis

from django_ledger import AdmissionStatus, Ledger, State
from django_ledger.core.importing import record_to_fields
from tests.support.ledger_helpers import (
    TRACEPARENT,
    corrupt,
    dump,
    indexes_of,
    namespace_keys,
    repair_all,
)

pytest_plugins = ["tests.support.ledger_fixtures"]

ADMITTED = AdmissionStatus.ADMITTED
DUPLICATE = AdmissionStatus.DUPLICATE
CONFLICT = AdmissionStatus.CONFLICT
REJECTED = AdmissionStatus.REJECTED
FULL = AdmissionStatus.FULL
DUE = 1_764_493_200_000  # 2025-11-30 09:00 UTC


@pytest.fixture
def closed(ledger: Ledger) -> Ledger:
    ledger.close_gate()
    return ledger


def test_gate_open_is_rejected_and_writes_nothing(
    ledger: Ledger, redis_client: redis.Redis, namespace: str
) -> None:
    admission = ledger.import_record("a", "p", State.PENDING, DUE)
    assert (admission.status, admission.reason, admission.record) == (REJECTED, "gate_open", None)
    answers = ledger.import_many(
        [
            {"request_id": "b", "payload": "p", "state": "PENDING", "due_at": DUE},
            {"request_id": "c", "payload": "p", "state": "COMPLETED", "due_at": DUE},
        ]
    )
    assert [(a.status, a.reason) for a in answers] == [(REJECTED, "gate_open")] * 2
    assert namespace_keys(redis_client, namespace) == set()


def test_admitted_pending_as_given(closed: Ledger) -> None:
    admission = closed.import_record("a", "payload", State.PENDING, DUE)
    assert admission.status is ADMITTED
    record = closed.resolve("a")
    assert record is not None
    assert admission.record == record
    assert (record.payload, record.state, record.due_at, record.owner) == (
        "payload",
        State.PENDING,
        DUE,
        "",
    )
    assert (record.attempts, record.fence, record.lease_until) == (0, 0, None)
    assert indexes_of(closed, "a") == {"ready": DUE}
    closed.open_gate()
    claim = closed.claim("w")  # due in the past: claimable at once
    assert claim is not None
    assert (claim.request_id, claim.attempt) == ("a", 1) and claim.fence > 0


def test_every_field_is_written_exactly(closed: Ledger) -> None:
    admission = closed.import_record(
        "full",
        "payload",
        State.COMPLETED,
        DUE,
        owner="old-worker",
        attempts=3,
        fence=7,
        created_at=DUE - 10_000,
        updated_at=DUE + 5_000,
        traceparent=TRACEPARENT,
        priority=-3,
    )
    assert admission.status is ADMITTED
    record = closed.resolve("full")
    assert record is not None
    assert record_to_fields(record) == {
        "request_id": "full",
        "payload": "payload",
        "state": "COMPLETED",
        "due_at": DUE,
        "owner": "old-worker",
        "attempts": 3,
        "fence": 7,
        "lease_until": None,
        "created_at": DUE - 10_000,
        "updated_at": DUE + 5_000,
        "traceparent": TRACEPARENT,
        "priority": -3,
    }
    assert indexes_of(closed, "full") == {"completed": DUE + 5_000}


@pytest.mark.parametrize(
    ("state", "index_name"),
    [
        (State.PENDING, "ready"),
        (State.COMPLETED, "completed"),
        (State.FAILED, "failed"),
        (State.DEAD, "dead"),
    ],
)
def test_each_state_lands_in_its_index(closed: Ledger, state: State, index_name: str) -> None:
    assert closed.import_record("a", "p", state, DUE, updated_at=DUE + 1).status is ADMITTED
    expected = DUE if state is State.PENDING else DUE + 1
    assert indexes_of(closed, "a") == {index_name: expected}


def test_state_names_and_datetimes_are_accepted(closed: Ledger) -> None:
    when = datetime(2025, 11, 30, 9, 0, tzinfo=UTC)
    answers = closed.import_many(
        [{"request_id": "a", "payload": "p", "state": "pending", "due_at": when}]
    )
    assert answers[0].status is ADMITTED
    record = closed.resolve("a")
    assert record is not None
    assert record.due_at == DUE


def test_duplicate_when_fields_agree(closed: Ledger) -> None:
    closed.import_record("a", "p", State.PENDING, DUE, attempts=2, fence=2)
    before = dump(closed)
    again = closed.import_record("a", "p", State.PENDING, DUE, attempts=2, fence=2)
    assert again.status is DUPLICATE
    assert again.record == closed.resolve("a")
    # Fields left out are not compared.
    fewer = closed.import_many(
        [{"request_id": "a", "payload": "p", "state": "PENDING", "due_at": DUE}]
    )
    assert fewer[0].status is DUPLICATE
    assert dump(closed) == before


def test_duplicate_of_an_admitted_record(ledger: Ledger) -> None:
    admitted = ledger.admit("a", "p")
    assert admitted.record is not None
    ledger.close_gate()
    fields = record_to_fields(admitted.record)
    assert ledger.import_many([fields])[0].status is DUPLICATE


def test_conflict_names_the_differing_fields(closed: Ledger) -> None:
    closed.import_record("a", "p", State.PENDING, DUE, owner="", attempts=1)
    before = dump(closed)
    answer = closed.import_record("a", "other", State.PENDING, DUE + 1, attempts=1)
    assert answer.status is CONFLICT
    assert answer.reason == "differs:due_at,payload"
    assert answer.record == closed.resolve("a")
    answer = closed.import_record("a", "p", State.FAILED, DUE, attempts=2)
    assert (answer.status, answer.reason) == (CONFLICT, "differs:attempts,state")
    assert dump(closed) == before


def test_claimed_without_a_lease_is_expired_so_repair_returns_it(closed: Ledger) -> None:
    before = closed.server_time_ms()
    admission = closed.import_record("a", "p", State.CLAIMED, DUE, owner="gone-worker")
    after = closed.server_time_ms()
    assert admission.status is ADMITTED
    record = closed.resolve("a")
    assert record is not None
    assert record.state is State.CLAIMED
    assert record.lease_until is not None
    assert before <= record.lease_until <= after
    assert (record.attempts, record.fence) == (1, 1)
    assert indexes_of(closed, "a") == {"leases": record.lease_until}

    report = repair_all(closed)

    assert report.expired == 1
    returned = closed.resolve("a")
    assert returned is not None
    assert returned.state is State.PENDING
    closed.open_gate()
    claim = closed.claim("w")
    assert claim is not None
    assert (claim.request_id, claim.attempt) == ("a", 2)
    assert claim.fence > record.fence


def test_claimed_with_a_lease_keeps_it(closed: Ledger) -> None:
    lease = closed.server_time_ms() + 600_000
    closed.import_record("a", "p", State.CLAIMED, DUE, owner="w", lease_until=lease)
    assert repair_all(closed).expired == 0
    record = closed.resolve("a")
    assert record is not None
    assert (record.state, record.lease_until) == (State.CLAIMED, lease)


def test_full_at_max_records(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_records=1)
    ledger.close_gate()
    answers = ledger.import_many(
        [
            {"request_id": "a", "payload": "p", "state": "PENDING", "due_at": DUE},
            {"request_id": "b", "payload": "p", "state": "PENDING", "due_at": DUE},
            {"request_id": "a", "payload": "p", "state": "PENDING", "due_at": DUE},
        ]
    )
    assert [(a.status, a.reason) for a in answers] == [
        (ADMITTED, None),
        (FULL, "max_records"),
        (DUPLICATE, None),
    ]
    assert ledger.resolve("b") is None


def _fields(**overrides: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "request_id": "bad",
        "payload": "p",
        "state": "PENDING",
        "due_at": DUE,
    }
    fields.update(overrides)
    return {name: value for name, value in fields.items() if value is not ...}


BAD_FIELDS = [
    pytest.param(_fields(colour="red"), "colour", id="unknown-field"),
    pytest.param(_fields(request_id=...), "request_id", id="missing-id"),
    pytest.param(_fields(payload=...), "payload", id="missing-payload"),
    pytest.param(_fields(state=...), "state", id="missing-state"),
    pytest.param(_fields(due_at=...), "due_at", id="missing-due"),
    pytest.param(_fields(request_id=""), "request_id", id="empty-id"),
    pytest.param(_fields(request_id="x" * 257), "request_id", id="long-id"),
    pytest.param(_fields(request_id="a\nb"), "request_id", id="control-id"),
    pytest.param(_fields(request_id=5), "request_id", id="int-id"),
    pytest.param(_fields(payload=5), "payload", id="int-payload"),
    pytest.param(_fields(payload="lone \ud800"), "payload", id="surrogate-payload"),
    pytest.param(_fields(payload="x" * 11), "payload", id="large-payload"),
    pytest.param(_fields(state="SLEEPING"), "state", id="unknown-state"),
    pytest.param(_fields(state=3), "state", id="int-state"),
    pytest.param(_fields(state="CLAIMED"), "owner", id="claimed-without-owner"),
    pytest.param(_fields(owner="a\x00"), "owner", id="control-owner"),
    pytest.param(_fields(lease_until=DUE), "lease_until", id="lease-on-pending"),
    pytest.param(_fields(attempts=-1), "attempts", id="negative-attempts"),
    # A claim is an attempt: a CLAIMED record at 0 given back would count -1 (found by
    # test_differential).
    pytest.param(
        _fields(state="CLAIMED", owner="w", attempts=0), "1 attempt", id="claimed-at-0-attempts"
    ),
    pytest.param(_fields(attempts="2"), "attempts", id="text-attempts"),
    pytest.param(_fields(fence=True), "fence", id="bool-fence"),
    pytest.param(_fields(due_at="soon"), "due_at", id="text-due"),
    pytest.param(_fields(due_at=-5), "due_at", id="negative-due"),
    pytest.param(_fields(due_at=datetime(2025, 1, 1)), "due_at", id="naive-due"),
    pytest.param(_fields(created_at=1.5), "created_at", id="float-created"),
    pytest.param(_fields(traceparent="nope"), "traceparent", id="bad-traceparent"),
    pytest.param("not a mapping", "object", id="not-a-mapping"),
]


@pytest.mark.parametrize(("bad", "field"), BAD_FIELDS)
def test_bad_fields_raise_and_nothing_of_the_call_is_written(
    ledger_factory: Callable[..., Ledger],
    redis_client: redis.Redis,
    bad: Any,
    field: str,
) -> None:
    ledger = ledger_factory(max_payload_bytes=10)
    ledger.close_gate()
    before = dump(ledger)
    good = {"request_id": "good", "payload": "p", "state": "PENDING", "due_at": DUE}
    with pytest.raises(ValueError, match=field):
        ledger.import_many([good, bad, dict(good, request_id="good-2")])
    assert dump(ledger) == before
    assert ledger.resolve("good") is None


def test_import_record_bad_field_raises(closed: Ledger) -> None:
    with pytest.raises(ValueError, match="owner"):
        closed.import_record("a", "p", State.CLAIMED, DUE)
    with pytest.raises(ValueError, match="colour"):
        closed.import_record("a", "p", State.PENDING, DUE, colour="red")
    assert closed.resolve("a") is None


def test_export_then_import_reproduces_the_record(
    ledger_factory: Callable[..., Ledger],
) -> None:
    source = ledger_factory(queue="source")
    source.admit("a", "payload ✓", traceparent=TRACEPARENT)
    claim = source.claim("w")
    assert claim is not None
    source.settle(claim, State.FAILED)
    original = source.resolve("a")
    assert original is not None

    target = ledger_factory(queue="target")
    target.close_gate()
    assert target.import_many([record_to_fields(original)])[0].status is ADMITTED
    assert target.resolve("a") == original
    assert indexes_of(target, "a") == {"failed": original.updated_at}


def test_the_same_id_twice_in_one_call(closed: Ledger) -> None:
    fields = {"request_id": "a", "payload": "p", "state": "PENDING", "due_at": DUE}
    answers = closed.import_many([fields, fields, dict(fields, payload="q")])
    assert [(a.status, a.reason) for a in answers] == [
        (ADMITTED, None),
        (DUPLICATE, None),
        (CONFLICT, "differs:payload"),
    ]


def test_corrupt_existing_record_is_a_conflict(closed: Ledger) -> None:
    closed.import_record("a", "p", State.PENDING, DUE)
    corrupt(closed, "a")
    before = dump(closed)
    answer = closed.import_record("a", "p", State.PENDING, DUE)
    assert (answer.status, answer.reason) == (CONFLICT, "corrupt")
    assert dump(closed) == before


def test_imported_fence_at_the_limit_cannot_repeat(closed: Ledger) -> None:
    limit = 2**53
    try:
        closed.import_record("a", "p", State.PENDING, DUE, attempts=limit, fence=limit)
    except ValueError:
        return  # refused up front: the fence can never repeat
    closed.open_gate()
    claim = closed.claim("w")
    assert claim is None or claim.fence > limit
