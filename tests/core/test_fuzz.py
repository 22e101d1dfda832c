"""Bad input: every public call of ``Ledger`` fuzzed with any Python values.

Each test draws arguments from the values the call expects, from values near them
(control characters, lone surrogates, over-long text, huge, negative, NaN, naive
datetimes, mutated claims) and from any Python value at all (wrong types, bytes,
None, objects). It holds every call to two promises of the contract:

* the only exceptions are the documented ones: ``TypeError``, ``ValueError`` or a
  ``LedgerError`` subclass;
* a refused call writes nothing: when the call raised, answered ``REJECTED`` (or,
  where the contract says "nothing changes", ``DUPLICATE``, ``CONFLICT``, ``FULL`` or
  ``LOST``), the digest of every key of the namespace is the same after as before.

The fuzzed queue holds records in every state (PENDING due and later, CLAIMED,
COMPLETED, FAILED, DEAD, corrupt, quarantined), so that ids and claims hit real
records too. Both paths run: optimized (fused scripts) and reference. Set
``LEDGER_FUZZ_EXAMPLES`` to run more examples than the suite's few dozen per call. The
values and the queue's helpers are in ``tests/support/fuzzing.py``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_ledger import (
    Admission,
    AdmissionStatus,
    Ledger,
    Settlement,
    SettlementStatus,
    State,
)
from django_ledger.core.importing import FIELDS
from tests.support.fuzzing import (
    REFUSED_ADMISSIONS,
    TRACEPARENT,
    Queue,
    any_text,
    anything,
    attempt,
    claims_of,
    counts,
    cursors,
    digest,
    durations,
    fresh_claim,
    instants,
    known_ids,
    ledgers,
    lost,
    never,
    refused_admissions,
    tricky_text,
)
from tests.support.redis_server import RedisServer, delete_namespace

#: Examples per fuzzed call: a few dozen in the suite; set LEDGER_FUZZ_EXAMPLES=1000 to dig.
FUZZ = settings(
    max_examples=int(os.environ.get("LEDGER_FUZZ_EXAMPLES", "40")),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- the queue ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def queue(redis_server: RedisServer) -> Iterator[Queue]:
    client = redis_server.client()
    namespace = f"fuzz{uuid.uuid4().hex[:12]}"
    common = {"max_payload_bytes": 64, "max_attempts": 3}
    optimized = Ledger(client, namespace, "q", **common)
    reference = Ledger(client, namespace, "q", optimized=False, **common)
    ids = [f"r{i}" for i in range(12)]
    for i, request in enumerate(ids):
        optimized.admit(request, f"payload {i}", delay=3600 if i == 11 else 0)
    claims = optimized.claim_many("holder", 6, timedelta(hours=2))
    optimized.settle(claims[0], State.COMPLETED)
    optimized.settle(claims[1], State.FAILED)
    optimized.settle(claims[2], State.PENDING, delay=60)
    dying = Ledger(client, namespace, "q", max_attempts=1)
    doomed = dying.claim("doomed", timedelta(milliseconds=1))
    assert doomed is not None
    time.sleep(0.01)
    dying.repair_records(
        [(doomed.request_id, client.hget(optimized.records_key, doomed.request_id))]
    )
    client.hset(optimized.records_key, ids[9], b"corrupt bytes")
    client.hset(optimized.records_key, ids[10], b"quarantined bytes")
    optimized.repair_records([(ids[10], b"quarantined bytes")])
    full = Ledger(client, namespace, "full", max_records=2)
    full.admit_many([("f1", "one"), ("f2", "two")])
    yield Queue(client, namespace, optimized, reference, full, ids)
    delete_namespace(client, namespace)
    client.close()


# -- construction ------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_constructor(queue: Queue, data: st.DataObject) -> None:
    args = {
        "namespace": data.draw(st.one_of(tricky_text, any_text, anything)),
        "queue": data.draw(st.one_of(st.just("q"), tricky_text, anything)),
        "max_payload_bytes": data.draw(st.one_of(counts, anything)),
        "max_records": data.draw(st.one_of(counts, anything)),
        "optimized": data.draw(st.one_of(st.booleans(), anything)),
        "max_attempts": data.draw(st.one_of(counts, anything)),
        "retention": data.draw(st.one_of(durations, anything)),
    }
    attempt(queue, lambda: Ledger(queue.client, **args), never)


# -- admission ---------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_admit(queue: Queue, data: st.DataObject) -> None:
    ledger = getattr(queue, data.draw(ledgers))
    request = data.draw(known_ids(queue))
    payload = data.draw(
        st.one_of(any_text, tricky_text, st.sampled_from(["payload 0", "x" * 65]), anything)
    )
    delay = data.draw(st.one_of(durations, anything))
    traceparent = data.draw(st.one_of(st.none(), st.just(TRACEPARENT), tricky_text, anything))
    answer = attempt(
        queue,
        lambda: ledger.admit(request, payload, delay, traceparent),
        lambda a: a.status in REFUSED_ADMISSIONS,
    )
    if answer is not None:
        _admission_holds(ledger, answer, payload)


@FUZZ
@given(data=st.data())
def test_admit_many(queue: Queue, data: st.DataObject) -> None:
    ledger = getattr(queue, data.draw(ledgers))
    pair = st.tuples(known_ids(queue), st.one_of(any_text, st.just("payload 1"), anything))
    item = st.one_of(pair, pair.map(list), anything, st.tuples(st.text(max_size=3)))
    requests = data.draw(st.one_of(st.lists(item, max_size=6), anything))
    delay = data.draw(st.one_of(durations, anything))
    answers = attempt(queue, lambda: ledger.admit_many(requests, delay), refused_admissions)
    if answers is not None:
        assert [a.request_id for a in answers] == [r[0] for r in requests]
        for answer, (_, payload) in zip(answers, requests, strict=True):
            _admission_holds(ledger, answer, payload)


def _admission_holds(ledger: Ledger, answer: Admission, payload: Any) -> None:
    assert isinstance(answer, Admission)
    if answer.status is AdmissionStatus.REJECTED:
        assert answer.reason
    if answer.status is AdmissionStatus.ADMITTED:
        stored = ledger.resolve(answer.request_id)
        assert stored is not None and stored.payload == payload and stored.state is State.PENDING


# -- claims and settlements ----------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_claim_many(queue: Queue, data: st.DataObject) -> None:
    ledger = getattr(queue, data.draw(ledgers))
    owner = data.draw(st.one_of(st.just("fuzzer"), tricky_text, any_text, anything))
    limit = data.draw(st.one_of(counts, anything))
    lease = data.draw(st.one_of(durations, anything))
    gate = data.draw(st.booleans())
    if gate:
        ledger.close_gate()
    try:
        if data.draw(st.booleans()):
            answer = attempt(queue, lambda: ledger.claim(owner, lease), lambda c: gate)
        else:
            answer = attempt(queue, lambda: ledger.claim_many(owner, limit, lease), lambda c: gate)
    finally:
        ledger.open_gate()
    if gate:
        assert not answer


@FUZZ
@given(data=st.data())
def test_renew(queue: Queue, data: st.DataObject) -> None:
    ledger = getattr(queue, data.draw(ledgers))
    claim = data.draw(claims_of(queue))(fresh_claim(queue))
    lease = data.draw(st.one_of(durations, anything))
    answer = attempt(
        queue, lambda: ledger.renew(claim, lease), lambda s: s.status is SettlementStatus.LOST
    )
    if answer is not None:
        assert isinstance(answer, Settlement)


@FUZZ
@given(data=st.data())
def test_settle(queue: Queue, data: st.DataObject) -> None:
    ledger = getattr(queue, data.draw(ledgers))
    claim = data.draw(claims_of(queue))(fresh_claim(queue))
    state = data.draw(st.one_of(st.sampled_from(list(State)), anything))
    delay = data.draw(st.one_of(durations, anything))
    answer = attempt(
        queue,
        lambda: ledger.settle(claim, state, delay),
        lambda s: s.status is SettlementStatus.LOST,
    )
    if answer is not None:
        assert isinstance(answer, Settlement)


@FUZZ
@given(data=st.data())
def test_settle_many(queue: Queue, data: st.DataObject) -> None:
    ledger = getattr(queue, data.draw(ledgers))
    states = st.one_of(st.sampled_from(list(State)), anything)
    item = st.one_of(
        st.tuples(claims_of(queue), states),
        st.tuples(claims_of(queue), states, st.one_of(durations, anything)),
        anything,
    )
    items = data.draw(st.one_of(st.lists(item, max_size=4), anything))
    if isinstance(items, list):
        items = [
            tuple(part(fresh_claim(queue)) if callable(part) else part for part in entry)
            if isinstance(entry, tuple)
            else entry
            for entry in items
        ]
    answers = attempt(queue, lambda: ledger.settle_many(items), lost)
    if answers is not None:
        assert len(answers) == len(items)


# -- reads -----------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_resolve(queue: Queue, data: st.DataObject) -> None:
    ledger = getattr(queue, data.draw(ledgers))
    request = data.draw(known_ids(queue))
    requests = data.draw(st.one_of(st.lists(known_ids(queue), max_size=5), anything))
    attempt(queue, lambda: ledger.resolve(request), lambda r: True)
    attempt(queue, lambda: ledger.resolve_many(requests), lambda r: True)


def test_reads_and_gate(queue: Queue) -> None:
    for ledger in queue.ledgers:
        attempt(queue, ledger.stats, lambda s: True)
        attempt(queue, ledger.server_time_ms, lambda s: True)
        assert attempt(queue, lambda ledger=ledger: ledger.gate_closed, lambda g: True) is False


# -- repair ----------------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_repair(queue: Queue, data: st.DataObject) -> None:
    ledger = getattr(queue, data.draw(ledgers))
    cursor = data.draw(st.one_of(cursors, anything))
    count = data.draw(st.one_of(counts, anything))
    which = data.draw(st.sampled_from(["repair", "repair_page", "repair_cycle"]))
    if which == "repair":
        attempt(queue, lambda: ledger.repair(cursor, count), never)
    elif which == "repair_page":
        attempt(queue, lambda: ledger.repair_page(cursor, count), never)
    else:
        attempt(queue, lambda: list(ledger.repair_cycle(count)), never)


@FUZZ
@given(data=st.data())
def test_repair_records(queue: Queue, data: st.DataObject) -> None:
    ledger = getattr(queue, data.draw(ledgers))
    raw = st.one_of(st.binary(max_size=80), st.just(b""), any_text, anything)
    pair = st.tuples(st.one_of(known_ids(queue), st.binary(max_size=6)), raw)
    observed = data.draw(st.one_of(st.lists(st.one_of(pair, anything), max_size=4), anything))
    cursor = data.draw(st.one_of(cursors, anything))
    attempt(queue, lambda: ledger.repair_records(observed, cursor), never)


# -- import ----------------------------------------------------------------------------------


def import_fields(queue: Queue) -> st.SearchStrategy[Any]:
    values = {
        "request_id": known_ids(queue),
        "payload": st.one_of(any_text, st.just("payload 0"), anything),
        "state": st.one_of(st.sampled_from([s.value for s in State] + list(State)), anything),
        "due_at": st.one_of(instants, anything),
        "owner": st.one_of(st.just("importer"), tricky_text, anything),
        "attempts": st.one_of(instants, anything),
        "fence": st.one_of(instants, anything),
        "lease_until": st.one_of(instants, anything),
        "created_at": st.one_of(instants, anything),
        "updated_at": st.one_of(instants, anything),
        "traceparent": st.one_of(st.just(TRACEPARENT), tricky_text, anything),
        "priority": st.one_of(st.integers(-101, 101), anything),
    }
    required = st.fixed_dictionaries({name: values[name] for name in FIELDS[:4]})
    extra = st.fixed_dictionaries(
        {}, optional={name: values[name] for name in FIELDS[4:]} | {"bogus": anything}
    )
    return st.one_of(
        st.builds(lambda a, b: {**a, **b}, required, extra),
        st.dictionaries(
            st.one_of(st.sampled_from(FIELDS), st.text(max_size=3), st.integers(), st.none()),
            anything,
            max_size=3,
        ),
        anything,
    )


@FUZZ
@given(data=st.data())
def test_import(queue: Queue, data: st.DataObject) -> None:
    ledger = getattr(queue, data.draw(ledgers))
    gate = data.draw(st.booleans())
    one = data.draw(st.booleans())
    if one:
        fields = data.draw(import_fields(queue))
    else:
        items = data.draw(st.one_of(st.lists(import_fields(queue), max_size=3), anything))
    if gate:
        ledger.close_gate()
    try:
        if one:
            if not isinstance(fields, dict) or not all(isinstance(k, str) for k in fields):
                return  # keyword arguments are names
            call: Callable[[], Any] = lambda: [ledger.import_record(**fields)]  # noqa: E731
        else:
            call = lambda: ledger.import_many(items)  # noqa: E731
        answers = attempt(queue, call, refused_admissions)
    finally:
        ledger.open_gate()
    if answers is not None and not gate:
        assert all(
            a.status is AdmissionStatus.REJECTED and a.reason == "gate_open" for a in answers
        )


# -- what the fuzz found -------------------------------------------------------------------


@pytest.mark.parametrize("optimized", [True, False])
def test_settle_with_a_bytes_request_id(queue: Queue, optimized: bool) -> None:
    # A claim rebuilt from a broker with its request id as bytes is the wrong type: a
    # TypeError that writes nothing, and the real claim still holds the record.
    ledger = queue.optimized if optimized else queue.reference
    claim = fresh_claim(queue)
    spoiled = replace(claim, request_id=claim.request_id.encode())  # type: ignore[arg-type]
    before = digest(queue)
    with pytest.raises(TypeError, match="request_id and owner must be str"):
        ledger.settle(spoiled, State.COMPLETED)
    assert digest(queue) == before, "a refused settlement wrote to Redis"
    record = ledger.resolve(claim.request_id)
    assert record is not None
    assert (record.state, record.owner, record.fence) == (State.CLAIMED, "holder", claim.fence)
    settled = ledger.settle(claim, State.COMPLETED)
    assert settled.status is SettlementStatus.SETTLED


#: The largest fence an import takes, and what it refuses beyond it (importing.py).
LARGEST_IMPORTED_FENCE = 2**52


@pytest.mark.parametrize("optimized", [True, False])
@pytest.mark.parametrize("fence", [0, 7, 2**31, LARGEST_IMPORTED_FENCE])
def test_an_imported_fence_still_grows(queue: Queue, optimized: bool, fence: int) -> None:
    # Found by the fuzz: an imported fence of 2**53 could not grow (Lua numbers are
    # doubles), so every later claim repeated it. Every fence an import takes must be
    # outgrown by the next claim of that id, and by each claim after it.
    ledger = Ledger(queue.client, queue.namespace, f"fence{optimized}{fence}", optimized=optimized)
    ledger.admit("other", "payload")  # the queue's own claims came first
    first = ledger.claim("worker")
    assert first is not None
    ledger.close_gate()
    try:
        answer = ledger.import_record("top", "payload", State.PENDING, 0, fence=fence)
    finally:
        ledger.open_gate()
    assert answer.status is AdmissionStatus.ADMITTED
    claim = ledger.claim("worker")
    assert claim is not None and claim.request_id == "top"
    assert claim.fence > fence
    assert ledger.settle(claim, State.PENDING).status is SettlementStatus.SETTLED
    again = ledger.claim("worker")
    assert again is not None and again.request_id == "top"
    assert again.fence > claim.fence


@pytest.mark.parametrize("optimized", [True, False])
@pytest.mark.parametrize("fence", [LARGEST_IMPORTED_FENCE + 1, 2**53 - 1, 2**53, 2**64])
def test_a_fence_too_large_to_grow_is_not_imported(
    queue: Queue, optimized: bool, fence: int
) -> None:
    ledger = Ledger(queue.client, queue.namespace, f"big{optimized}{fence}", optimized=optimized)
    ledger.close_gate()
    try:
        before = digest(queue)
        with pytest.raises(ValueError, match=r"fence must be a whole number from 0 to 2\*\*52"):
            ledger.import_record("top", "payload", State.PENDING, 0, fence=fence)
        assert digest(queue) == before, "a refused import wrote to Redis"
    finally:
        ledger.open_gate()
    assert ledger.resolve("top") is None


@pytest.mark.parametrize("call", ["admit", "claim", "retention"])
def test_a_duration_too_large_for_a_float_is_a_value_error(queue: Queue, call: str) -> None:
    huge = 10**400
    with pytest.raises(ValueError):
        if call == "admit":
            queue.optimized.admit("huge-delay", "payload", delay=huge)
        elif call == "claim":
            queue.optimized.claim("worker", lease=huge)
        else:
            Ledger(queue.client, queue.namespace, "q", retention=huge)
