"""A lost attempt (its worker died, its lease expired): recorded by repair, in both modes.

Repair appends the attempt to the task's result document, in the same script call that
expires its lease, with what the record holds then: the owner, ``updated_at`` as its
start, the lease's expiry as its end. The optimized path (``repair.lua``) and the
reference path write the same bytes (``core/history.py``).
"""

from __future__ import annotations

import pytest
import redis

from django_ledger import Ledger, State
from django_ledger.core.history import LEASE_EXPIRED_PATH, lost_attempt_json, with_attempt
from django_ledger.core.jobs import Attempt, ResultDoc, decode_result, encode_result
from django_ledger.core.records import Record
from django_ledger.tasks.state import UNKNOWN_WORKER, task_state

MODES = [pytest.param(True, id="optimized"), pytest.param(False, id="reference")]
#: An owner whose JSON needs escapes, and text that is not ASCII.
OWNER = 'w "1" \\ é-ü'


def _lapse_and_repair(ledger: Ledger, lease: float) -> None:
    ledger.clock_skew_ms += int(lease * 1000) + 1
    for _ in ledger.repair_cycle():
        pass


@pytest.mark.parametrize("optimized", MODES)
def test_repair_records_each_lost_attempt_with_its_worker_and_times(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    ledger = Ledger(redis_client, namespace, "q", optimized=optimized)
    ledger.admit("t", '{"args":[],"kwargs":{},"task":"x.y","v":1}')
    first = ledger.claim(OWNER, 5)
    assert first is not None
    claimed = ledger.resolve("t")
    assert claimed is not None and claimed.lease_until is not None
    _lapse_and_repair(ledger, 5)
    (raw,) = ledger.results(["t"])
    doc = decode_result(raw)
    assert [(a.worker_id, a.started_at, a.finished_at) for a in doc.attempts] == [
        (OWNER, claimed.updated_at, claimed.lease_until)
    ]
    assert doc.attempts[0].error is not None
    assert doc.attempts[0].error["exception_class_path"] == LEASE_EXPIRED_PATH
    # The bytes of core/history.py, on either path (an escaped owner, non-ASCII text).
    expected = with_attempt(
        None, lost_attempt_json(OWNER, 1, claimed.updated_at, claimed.lease_until)
    )
    assert expected is not None and raw == expected.encode()

    # The second claim's worker dies too: appended after the first, the rest unchanged.
    second = ledger.claim("w-2", 5)
    assert second is not None and second.attempt == 2
    again = ledger.resolve("t")
    assert again is not None and again.lease_until is not None
    _lapse_and_repair(ledger, 5)
    (raw2,) = ledger.results(["t"])
    assert raw2 is not None and raw is not None
    assert raw2.startswith(raw[:-2] + b",")
    assert [a.worker_id for a in decode_result(raw2).attempts] == [OWNER, "w-2"]
    assert decode_result(raw2).attempts[1].started_at == again.updated_at
    record = ledger.resolve("t")
    assert record is not None and record.state is State.PENDING and record.attempts == 2
    state = task_state("q", record, raw2)
    assert state.worker_ids == [OWNER, "w-2"] and state.started_at == claimed.updated_at
    assert state.last_attempted_at == again.updated_at


@pytest.mark.parametrize("optimized", MODES)
def test_a_settled_attempt_then_a_lost_one(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    ledger = Ledger(redis_client, namespace, "q", optimized=optimized)
    ledger.admit("t", "work")
    first = ledger.claim("w-1", 5)
    assert first is not None
    settled = encode_result(ResultDoc([Attempt("w-1", 10, 20, {"exception_class_path": "E"})]))
    ledger.settle(first, State.PENDING, 0, result=settled)
    assert ledger.claim("w-2", 5) is not None
    _lapse_and_repair(ledger, 5)
    (raw,) = ledger.results(["t"])
    assert raw is not None and raw.startswith(settled[:-2].encode() + b",")
    assert [a.worker_id for a in decode_result(raw).attempts] == ["w-1", "w-2"]


@pytest.mark.parametrize("optimized", MODES)
def test_a_held_claim_or_a_foreign_result_is_left_alone(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    ledger = Ledger(redis_client, namespace, "q", optimized=optimized)
    ledger.admit_many([("held", "a"), ("done", "b"), ("odd", "c")])
    claims = ledger.claim_many("w-1", 3, 5, hold_after=0)
    assert {claim.request_id for claim in claims} == {"held", "done", "odd"}
    # Not a result document a worker writes: a return value, or not JSON at all.
    redis_client.hset(ledger.results_key, "done", '{"v":1,"attempts":[],"return_value":[1]}')
    redis_client.hset(ledger.results_key, "odd", "not json]}")
    ledger.settle(next(c for c in claims if c.request_id == "done"), State.CLAIMED, 5)
    ledger.settle(next(c for c in claims if c.request_id == "odd"), State.CLAIMED, 5)
    _lapse_and_repair(ledger, 5)
    assert ledger.results(["held", "done", "odd"]) == [
        None,
        b'{"v":1,"attempts":[],"return_value":[1]}',
        b"not json]}",
    ]
    records = ledger.resolve_many(["held", "done", "odd"])
    assert [(r.state, r.attempts) for r in records if r is not None] == [
        (State.PENDING, 0),
        (State.PENDING, 1),
        (State.PENDING, 1),
    ]


def test_earlier_lost_attempts_of_a_claimed_task_are_not_its_current_workers() -> None:
    # A document without the lost attempts (stored before repair recorded them).
    record = Record(
        request_id="t",
        payload="work",
        state=State.CLAIMED,
        due_at=1,
        lease_until=99,
        owner="w-3",
        attempts=3,
        fence=3,
        created_at=1,
        updated_at=50,
    )
    state = task_state("q", record, None)
    assert state.worker_ids == [UNKNOWN_WORKER, UNKNOWN_WORKER, "w-3"]
    assert [e["exception_class_path"] for e in state.errors] == [LEASE_EXPIRED_PATH] * 2


@pytest.mark.parametrize("optimized", MODES)
def test_a_renewal_does_not_move_a_running_attempts_start(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    ledger = Ledger(redis_client, namespace, "q", optimized=optimized)
    ledger.admit("t", "work")
    claim = ledger.claim("w-1", 5)
    assert claim is not None
    claimed = ledger.resolve("t")
    assert claimed is not None
    ledger.clock_skew_ms += 2000
    assert ledger.renew(claim, 5).record is not None  # what the renewer sends
    renewed = ledger.resolve("t")
    assert renewed is not None
    assert task_state("q", renewed, None).started_at == claimed.updated_at
