"""admit: each request once by its id, every refusal with nothing written."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_ledger import Admission, AdmissionStatus, Ledger, Record, State
from django_ledger.core.records import id_problem
from tests.support.ledger_helpers import (
    TRACEPARENT,
    advance,
    corrupt,
    dump,
    expire_and_repair,
    index,
    namespace_keys,
    raw,
    repair_all,
)

pytest_plugins = ["tests.support.ledger_fixtures"]

ADMITTED = AdmissionStatus.ADMITTED
DUPLICATE = AdmissionStatus.DUPLICATE
CONFLICT = AdmissionStatus.CONFLICT
REJECTED = AdmissionStatus.REJECTED
FULL = AdmissionStatus.FULL


# -- ADMITTED ---------------------------------------------------------------------------


def test_admitted_record_is_pending_and_due_now(ledger: Ledger) -> None:
    before = ledger.server_time_ms()
    admission = ledger.admit("job-1", '{"to": "a@example.com"}')
    after = ledger.server_time_ms()

    assert admission.status is ADMITTED
    assert admission.request_id == "job-1"
    assert admission.reason is None
    assert admission.accepted
    record = ledger.resolve("job-1")
    assert record is not None
    assert admission.record == record
    assert record.request_id == "job-1"
    assert record.payload == '{"to": "a@example.com"}'
    assert record.state is State.PENDING
    assert record.owner == ""
    assert record.attempts == 0
    assert record.fence == 0
    assert record.lease_until is None
    assert record.traceparent is None
    assert before <= record.created_at <= after
    assert record.updated_at == record.created_at
    assert record.due_at == record.created_at
    # The record is indexed in ready, scored by when it is due, and nowhere else.
    assert index(ledger, ledger.ready_key) == {"job-1": record.due_at}
    assert index(ledger, ledger.leases_key) == {}
    assert record.due_datetime.timestamp() * 1000 == pytest.approx(record.due_at)


@pytest.mark.parametrize(
    ("delay", "delay_ms"),
    [
        (timedelta(minutes=5), 300_000),
        (90, 90_000),
        (1.5, 1_500),
        (timedelta(milliseconds=1), 1),
    ],
)
def test_admitted_record_is_due_at_server_now_plus_delay(
    ledger: Ledger, delay: timedelta | float, delay_ms: int
) -> None:
    before = ledger.server_time_ms()
    admission = ledger.admit("later", "p", delay=delay)
    after = ledger.server_time_ms()

    assert admission.status is ADMITTED
    record = ledger.resolve("later")
    assert record is not None
    assert before <= record.created_at <= after
    assert record.due_at == record.created_at + delay_ms
    assert index(ledger, ledger.ready_key) == {"later": record.due_at}


def test_server_clock_decides_when_due(ledger: Ledger) -> None:
    # The ledger's view of the server clock is an hour ahead: due_at follows it.
    advance(ledger, 3_600_000)
    before = ledger.server_time_ms()
    ledger.admit("skewed", "p", delay=10)
    record = ledger.resolve("skewed")
    assert record is not None
    assert record.due_at >= before + 10_000


def test_traceparent_is_stored(ledger: Ledger) -> None:
    admission = ledger.admit("traced", "p", traceparent=TRACEPARENT)
    assert admission.status is ADMITTED
    record = ledger.resolve("traced")
    assert record is not None
    assert record.traceparent == TRACEPARENT
    assert admission.record == record
    claim = ledger.claim("w")
    assert claim is not None
    assert claim.traceparent == TRACEPARENT


@pytest.mark.parametrize(
    "payload",
    [
        "",
        "plain",
        "nul \x00 inside",
        "lines\nand\r\nreturns",
        "emoji \U0001f680 and accents éü",
        "colons:1:2:3:",
        "\x7f\x01 control bytes",
        "edges \U0010ffff \uffff \ufffe \u0080",
        "x" * 10_000,
    ],
)
def test_payload_round_trips_exactly(ledger: Ledger, payload: str) -> None:
    assert ledger.admit("p", payload).status is ADMITTED
    record = ledger.resolve("p")
    assert record is not None
    assert record.payload == payload
    claim = ledger.claim("w")
    assert claim is not None
    assert claim.payload == payload


@pytest.mark.parametrize(
    "request_id",
    ["a", "x" * 256, "é" * 128, "with space", "brace}{:records", "\U0001f680", "ns:q}:ready"],
)
def test_unusual_ids_are_admitted_and_never_reach_a_key_name(
    ledger: Ledger, redis_client: redis.Redis, namespace: str, request_id: str
) -> None:
    assert ledger.admit(request_id, "p").status is ADMITTED
    record = ledger.resolve(request_id)
    assert record is not None
    assert record.request_id == request_id
    assert {key.decode() for key in namespace_keys(redis_client, namespace)} == {
        ledger.records_key,
        ledger.ready_key,
        ledger.runner.keys.wake,  # the wake key: an admission due now wakes an idle worker
    }


# -- DUPLICATE --------------------------------------------------------------------------


def _to_state(ledger: Ledger, state: str) -> None:
    """Bring record "dup" (payload "same") to ``state``."""
    delay = 3600 if state == "pending_later" else 0
    assert ledger.admit("dup", "same", delay=delay).status is ADMITTED
    if state in ("pending", "pending_later"):
        return
    claim = ledger.claim("w", lease=60)
    assert claim is not None
    if state == "claimed":
        return
    if state == "expired_lease":
        advance(ledger, 61_000)
        return
    if state == "completed":
        assert ledger.settle(claim, State.COMPLETED).ok
    elif state == "failed":
        assert ledger.settle(claim, State.FAILED).ok
    elif state == "retry":
        assert ledger.settle(claim, State.PENDING, delay=600).ok
    elif state == "dead":
        # max_attempts is 1 for this ledger: the first expiry makes it DEAD.
        assert expire_and_repair(ledger, 61_000).dead == 1
    else:  # pragma: no cover
        raise AssertionError(state)


STATES = [
    "pending",
    "pending_later",
    "claimed",
    "expired_lease",
    "completed",
    "failed",
    "retry",
    "dead",
]


@pytest.mark.parametrize("state", STATES)
def test_duplicate_in_every_state_changes_nothing(
    ledger_factory: Callable[..., Ledger], state: str
) -> None:
    ledger = ledger_factory(max_attempts=1)
    _to_state(ledger, state)
    stored = ledger.resolve("dup")
    before = dump(ledger)

    admission = ledger.admit("dup", "same", delay=999, traceparent=TRACEPARENT)

    assert admission.status is DUPLICATE
    assert admission.reason is None
    assert admission.accepted
    assert admission.record == stored
    assert dump(ledger) == before


@pytest.mark.parametrize("state", STATES)
def test_conflict_in_every_state_changes_nothing(
    ledger_factory: Callable[..., Ledger], state: str
) -> None:
    ledger = ledger_factory(max_attempts=1)
    _to_state(ledger, state)
    stored = ledger.resolve("dup")
    before = dump(ledger)

    admission = ledger.admit("dup", "other")

    assert admission.status is CONFLICT
    assert admission.reason == "payload_differs"
    assert not admission.accepted
    assert admission.record == stored
    assert admission.record is not None
    assert admission.record.payload == "same"
    assert dump(ledger) == before


def test_duplicate_is_judged_on_payload_alone(ledger: Ledger) -> None:
    ledger.admit("d", "p", delay=0)
    before = dump(ledger)
    # Another delay or trace context does not make it a different request.
    assert ledger.admit("d", "p", delay=60, traceparent=TRACEPARENT).status is DUPLICATE
    assert dump(ledger) == before


def test_conflict_on_payloads_that_differ_only_in_bytes(ledger: Ledger) -> None:
    # NFC and NFD spell the same letter with other bytes: they are other payloads.
    ledger.admit("n", "\u00e9")
    assert ledger.admit("n", "e\u0301").status is CONFLICT
    assert ledger.admit("n", "\u00e9 ").status is CONFLICT
    assert ledger.admit("n", "\u00e9").status is DUPLICATE


def test_traceparent_is_not_part_of_the_payload(ledger: Ledger) -> None:
    ledger.admit("t", "p", traceparent=TRACEPARENT)
    ledger.admit("u", TRACEPARENT + "p")
    before = dump(ledger)
    assert ledger.admit("t", "p").status is DUPLICATE
    assert ledger.admit("t", TRACEPARENT + "p").status is CONFLICT
    assert ledger.admit("u", "p", traceparent=TRACEPARENT).status is CONFLICT
    assert ledger.admit("u", TRACEPARENT + "p").status is DUPLICATE
    assert dump(ledger) == before


def test_corrupt_id_answers_conflict_corrupt(ledger: Ledger) -> None:
    ledger.admit("c", "p")
    corrupt(ledger, "c")
    before = dump(ledger)
    admission = ledger.admit("c", "p")
    assert admission.status is CONFLICT
    assert admission.reason == "corrupt"
    assert admission.record is None
    assert dump(ledger) == before


def test_quarantined_id_answers_conflict_quarantined(ledger: Ledger) -> None:
    ledger.admit("c", "p")
    corrupt(ledger, "c")
    assert repair_all(ledger).quarantined == 1
    before = dump(ledger)
    for payload in ("p", "other"):
        admission = ledger.admit("c", payload)
        assert admission.status is CONFLICT
        assert admission.reason == "quarantined"
    assert dump(ledger) == before


# -- FULL -------------------------------------------------------------------------------


def test_full_at_max_records(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_records=3)
    for n in range(3):
        assert ledger.admit(f"r{n}", "p").status is ADMITTED
    before = dump(ledger)

    admission = ledger.admit("r3", "p")

    assert admission.status is FULL
    assert admission.reason == "max_records"
    assert admission.record is None
    assert not admission.accepted
    assert dump(ledger) == before
    assert ledger.resolve("r3") is None
    # A known id is still recognised when full.
    assert ledger.admit("r0", "p").status is DUPLICATE
    conflict = ledger.admit("r1", "other")
    assert (conflict.status, conflict.reason) == (CONFLICT, "payload_differs")
    assert dump(ledger) == before


def test_ended_records_never_make_a_queue_full(ledger_factory: Callable[..., Ledger]) -> None:
    # The probe's case: a drained queue of ten answered FULL while its ended records stayed.
    ledger = ledger_factory(max_records=10, retention=60)
    ledger.admit_many([(f"r{n}", "p") for n in range(10)])
    assert ledger.admit("r10", "p").status is FULL  # ten live records: full
    claims = ledger.claim_many("w", 10)
    ledger.settle_many([(claim, State.COMPLETED) for claim in claims[:7]])
    ledger.settle_many([(claim, State.FAILED) for claim in claims[7:]])
    stats = ledger.stats()
    assert (stats.pending, stats.claimed, stats.completed, stats.failed) == (0, 0, 7, 3)
    answers = ledger.admit_many([(f"s{n}", "p") for n in range(11)])
    assert [a.status for a in answers] == [ADMITTED] * 10 + [FULL]
    # The ended records are still kept, so their ids are still recognised.
    assert ledger.admit("r0", "p").status is DUPLICATE
    assert ledger.stats().total == 20


def test_quarantined_ids_count_toward_max_records(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_records=1)
    ledger.admit("a", "p")
    corrupt(ledger, "a")
    repair_all(ledger)
    assert ledger.admit("b", "p").status is FULL


def test_full_within_one_call(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_records=2)
    answers = ledger.admit_many([("a", "p"), ("b", "p"), ("c", "p"), ("a", "p")])
    assert [a.status for a in answers] == [ADMITTED, ADMITTED, FULL, DUPLICATE]
    assert ledger.resolve("c") is None


def test_repeats_before_new_ids_leave_the_room_as_it_was(
    ledger_factory: Callable[..., Ledger],
) -> None:
    # The script counts the live records when a new id first needs room, past repeats.
    ledger = ledger_factory(max_records=3)
    ledger.admit_many([("a", "p"), ("b", "p")])
    answers = ledger.admit_many([("a", "p"), ("b", "q"), ("c", "p"), ("d", "p"), ("a", "p")])
    assert [a.status for a in answers] == [DUPLICATE, CONFLICT, ADMITTED, FULL, DUPLICATE]
    assert ledger.stats().total == 3


# -- properties -------------------------------------------------------------------------

_id_text = st.text(min_size=1, max_size=40).filter(lambda s: id_problem(s) is None)
_payload_text = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=200)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(request_id=_id_text, payload=_payload_text, other=_payload_text)
def test_any_text_is_admitted_once(
    ledger: Ledger, request_id: str, payload: str, other: str
) -> None:
    ledger.redis.delete(*ledger.keys)
    first = ledger.admit(request_id, payload)
    assert first.status is ADMITTED
    record = ledger.resolve(request_id)
    assert record == first.record
    assert isinstance(record, Record)
    assert record.payload == payload
    before = raw(ledger, request_id)
    again = ledger.admit(request_id, payload)
    assert (again.status, again.record) == (DUPLICATE, record)
    if other != payload:
        assert ledger.admit(request_id, other).status is CONFLICT
    assert raw(ledger, request_id) == before


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(request_id=st.text(max_size=300).filter(lambda s: id_problem(s) is not None))
def test_any_unusable_id_is_rejected(
    ledger: Ledger, redis_client: redis.Redis, namespace: str, request_id: str
) -> None:
    admission: Admission = ledger.admit(request_id, "p")
    assert admission.status is REJECTED
    assert admission.reason == id_problem(request_id)
    assert namespace_keys(redis_client, namespace) == set()
