"""Cancel a record, queued or running (core/cancelling.py, cancel.lua): on the fused path.

A queued record ends FAILED and never runs; a running one ends FAILED under a new fence
so its run's renewals and settlement are refused; an ended one is left as it is. The
result document says who cancelled, when and why.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import redis

from django_ledger import Ledger, State
from django_ledger.core.cancelling import CancelStatus
from django_ledger.core.flows import FlowStep, admit_workflow, read_workflow
from django_ledger.core.jobs import decode_result
from django_ledger.core.limits import Limits
from django_ledger.core.results import SettlementStatus
from django_ledger.core.sharded import ShardedLedger
from tests.support.ledger_helpers import corrupt, expire_and_repair, indexes_of, raw

pytest_plugins = ["tests.support.ledger_fixtures"]

CANCELLED, ENDED, CHANGED = CancelStatus.CANCELLED, CancelStatus.ENDED, CancelStatus.CHANGED
MISSING, CORRUPT = CancelStatus.MISSING, CancelStatus.CORRUPT
LOST = SettlementStatus.LOST


@pytest.fixture
def optimized() -> bool:
    """The fused path: cancel is an extra of the job system (a reference ledger refuses it)."""
    return True


def cancelled_error(ledger: Ledger, request_id: str) -> dict[str, Any]:
    """The last attempt's error of ``request_id``'s result document."""
    doc = decode_result(ledger.results([request_id])[0])
    error = doc.attempts[-1].error
    assert isinstance(error, dict)
    return error


def test_a_queued_record_ends_failed_and_is_never_claimed(ledger: Ledger) -> None:
    ledger.admit("now", "{}")
    ledger.admit("later", "{}", delay=60)
    answer = ledger.cancel("now", by="alice", reason="wrong customer")
    assert answer.status is CANCELLED and answer.cancelled
    assert answer.was is State.PENDING
    assert answer.record is not None and answer.record.state is State.FAILED
    assert ledger.cancel("later", by="bob").status is CANCELLED
    for request_id in ("now", "later"):
        record = ledger.resolve(request_id)
        assert record is not None and record.state is State.FAILED
        assert list(indexes_of(ledger, request_id)) == ["failed"]
    assert ledger.claim_many("w", 10, lease=30) == []
    error = cancelled_error(ledger, "now")
    assert error["exception_class_path"] == "django_ledger.tasks.Cancelled"
    mark = error["cancelled"]
    assert (mark["by"], mark["reason"], mark["was"]) == ("alice", "wrong customer", "P")
    when = datetime.fromtimestamp(mark["at"] / 1000, tz=UTC)
    iso = when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{mark['at'] % 1000:03d}Z"
    assert error["traceback"] == (
        f"django_ledger.tasks.Cancelled: cancelled by alice at {iso}: wrong customer"
    )
    assert cancelled_error(ledger, "later")["traceback"].startswith(
        "django_ledger.tasks.Cancelled: cancelled by bob at "
    )


def test_a_running_record_ends_under_a_new_fence_and_its_run_is_refused(ledger: Ledger) -> None:
    ledger.admit("job", "{}")
    claim = ledger.claim("w-1", lease=30)
    assert claim is not None
    answer = ledger.cancel("job", by="alice", reason="stuck")
    assert answer.status is CANCELLED and answer.was is State.CLAIMED
    assert answer.fence > claim.fence
    record = ledger.resolve("job")
    assert record is not None and record.state is State.FAILED and record.fence == answer.fence
    assert record.lease_until is None
    # The cancelled run learns it lost the record at its next renewal or settlement.
    renewed = ledger.renew(claim, lease=30)
    assert (renewed.status, renewed.reason) == (LOST, "superseded")
    settled = ledger.settle(claim, State.COMPLETED, result='{"v":1,"attempts":[]}')
    assert (settled.status, settled.reason) == (LOST, "superseded")
    record = ledger.resolve("job")
    assert record is not None and record.state is State.FAILED
    # The attempt it cancelled is the one the worker ran: its owner, from its start.
    doc = decode_result(ledger.results(["job"])[0])
    assert doc.attempts[-1].worker_id == "w-1"
    assert doc.attempts[-1].started_at == claim_started(claim)
    assert doc.attempts[-1].error["cancelled"]["fence"] == answer.fence  # type: ignore[index]
    assert ledger.claim("w-2") is None  # not given back: it never runs again


def claim_started(claim: Any) -> int:
    started: int = claim.lease_until - 30_000
    return started


def test_the_new_fence_is_above_the_floor_and_above_every_fence_given(ledger: Ledger) -> None:
    ledger.admit("a", "{}")
    ledger.admit("b", "{}")
    claim = ledger.claim("w")
    assert claim is not None
    floor = ledger.next_fence()
    assert floor > claim.fence
    answer = ledger.cancel(claim.request_id, by="alice", fence_floor=floor)
    assert answer.fence >= floor
    high = ledger.cancel("b", by="alice", fence_floor=10**15)
    assert high.fence >= 10**15
    assert ledger.next_fence() > high.fence  # every later claim's fence is larger still


def test_an_ended_record_is_left_as_it_is_and_a_second_cancel_says_so(ledger: Ledger) -> None:
    ledger.admit("done", "{}")
    ledger.admit("twice", "{}")
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "done"
    ledger.settle(claim, State.COMPLETED)
    before = raw(ledger, "done")
    answer = ledger.cancel("done", by="alice")
    assert (answer.status, answer.was) == (ENDED, State.COMPLETED)
    assert raw(ledger, "done") == before
    assert ledger.cancel("twice", by="alice").status is CANCELLED
    after = raw(ledger, "twice")
    again = ledger.cancel("twice", by="bob", reason="again")
    assert (again.status, again.was) == (ENDED, State.FAILED)
    assert raw(ledger, "twice") == after
    assert len(decode_result(ledger.results(["twice"])[0]).attempts) == 1


def test_missing_purged_corrupt_and_changed_records_are_not_touched(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(max_retained=1)
    assert ledger.cancel("never", by="alice").status is MISSING
    # Past max_retained the oldest ended record is purged (in one millisecond, the lowest id).
    ledger.admit("a-old", "{}")
    ledger.cancel("a-old", by="alice")
    ledger.admit("b-new", "{}")
    ledger.cancel("b-new", by="alice")
    assert ledger.resolve("a-old") is None
    assert ledger.cancel("a-old", by="alice").status is MISSING
    # Another queue, retaining what it ends: "seen" may end in b-new's millisecond, and
    # of two ended in one millisecond a COMPLETED one goes first.
    ledger = ledger_factory(queue="kept")
    ledger.admit("bad", "{}")
    corrupt(ledger, "bad")
    assert ledger.cancel("bad", by="alice").status is CORRUPT
    ledger.admit("seen", "{}")
    shown = raw(ledger, "seen")
    assert shown is not None
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "seen"
    answer = ledger.cancel("seen", by="alice", expect=shown)
    assert (answer.status, answer.was) == (CHANGED, State.CLAIMED)
    assert ledger.settle(claim, State.COMPLETED).status is SettlementStatus.SETTLED
    current = raw(ledger, "seen")
    assert current is not None
    assert ledger.cancel("seen", by="alice", expect=current).status is ENDED


def test_a_cancel_after_repair_took_the_lease_back_refuses_the_old_run(ledger: Ledger) -> None:
    ledger.admit("slow", "{}")
    claim = ledger.claim("w", lease=1)
    assert claim is not None
    expire_and_repair(ledger, 5_000)  # PENDING again; the old run may still be going
    answer = ledger.cancel("slow", by="alice")
    assert (answer.status, answer.was) == (CANCELLED, State.PENDING)
    assert answer.fence > claim.fence
    assert ledger.settle(claim, State.COMPLETED).status is LOST


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"request_id": "", "by": "a"}, ValueError, "id"),
        ({"request_id": "x", "by": ""}, ValueError, "by must name who cancels"),
        ({"request_id": "x", "by": "a" * 201}, ValueError, "by is longer than 200 bytes"),
        ({"request_id": "x", "by": "a", "reason": "é" * 251}, ValueError, "longer than 500"),
        ({"request_id": "x", "by": "a", "reason": "\udc80"}, ValueError, "not valid text"),
        ({"request_id": "x", "by": 3}, TypeError, "by must be a str"),
        ({"request_id": "x", "by": "a", "fence_floor": -1}, ValueError, "fence_floor"),
        ({"request_id": "x", "by": "a", "expect": "raw"}, TypeError, "expect must be"),
    ],
)
def test_bad_input_gets_a_clear_error_and_writes_nothing(
    ledger: Ledger, redis_client: redis.Redis, namespace: str, kwargs: Any, error: type, match: str
) -> None:
    ledger.admit("x", "{}")
    before = raw(ledger, "x")
    with pytest.raises(error, match=match):
        ledger.cancel(**kwargs)
    assert raw(ledger, "x") == before


def test_hostile_text_is_stored_as_json(ledger: Ledger) -> None:
    ledger.admit("x", "{}")
    nasty = 'a"}\\\n\x00\u2028é'
    ledger.cancel("x", by=nasty, reason=nasty * 10)
    mark = cancelled_error(ledger, "x")["cancelled"]
    assert (mark["by"], mark["reason"]) == (nasty, nasty * 10)


def test_a_cancelled_step_moves_its_dependants_on_as_a_failed_one(ledger: Ledger) -> None:
    steps = [
        FlowStep("a", "{}"),
        FlowStep("b", "{}", parents=("a",)),
        FlowStep("c", "{}", parents=("a",), on_failure="continue"),
    ]
    admit_workflow(ledger, "wf", steps)
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "wf:a"
    assert ledger.cancel("wf:a", by="alice").status is CANCELLED
    status = read_workflow(ledger, "wf")
    assert status is not None
    assert {s.name: s.state for s in status.steps} == {
        "a": "FAILED",
        "b": "CANCELLED",
        "c": "PENDING",
    }
    assert b"wf:a ended FAILED: django_ledger.tasks.Cancelled: cancelled by alice" in (
        status.step("b").result or b""
    )


def test_cancel_races_claims_and_each_record_runs_at_most_as_told(ledger: Ledger) -> None:
    """Cancel vs claim: `cancelled` from PENDING means never claimed; from CLAIMED, refused."""
    ids = [f"r{i}" for i in range(300)]
    ledger.admit_many([(i, "{}") for i in ids])
    claims: dict[str, Any] = {}
    answers: dict[str, Any] = {}

    def claimer() -> None:
        while len(claims) + sum(a.was is State.PENDING for a in list(answers.values())) < 300:
            got = ledger.claim_many("w", 5, lease=30)
            if not got and ledger.stats().pending == 0:
                return
            for c in got:
                claims[c.request_id] = c

    thread = threading.Thread(target=claimer)
    thread.start()
    for request_id in ids:
        answers[request_id] = ledger.cancel(request_id, by="alice")
    thread.join(30)
    assert not thread.is_alive()
    assert all(a.status is CANCELLED for a in answers.values())
    from_pending = {i for i, a in answers.items() if a.was is State.PENDING}
    assert from_pending.isdisjoint(claims)
    assert set(claims) == set(ids) - from_pending
    for claim in claims.values():
        assert ledger.settle(claim, State.COMPLETED).status is LOST
    assert ledger.stats().failed == 300


def test_cancel_and_settle_race_one_wins_whole(ledger: Ledger) -> None:
    ids = [f"s{i}" for i in range(200)]
    ledger.admit_many([(i, "{}") for i in ids])
    claims = ledger.claim_many("w", 200, lease=30)
    settled: dict[str, Any] = {}
    thread = threading.Thread(
        target=lambda: settled.update(
            (c.request_id, ledger.settle(c, State.COMPLETED)) for c in claims
        )
    )
    thread.start()
    answers = {i: ledger.cancel(i, by="alice") for i in ids}
    thread.join(30)
    for request_id in ids:
        record = ledger.resolve(request_id)
        assert record is not None
        if answers[request_id].status is CANCELLED:
            assert settled[request_id].status is LOST
            assert record.state is State.FAILED
        else:
            assert answers[request_id].status is ENDED
            assert settled[request_id].status is SettlementStatus.SETTLED
            assert record.state is State.COMPLETED


def test_a_sharded_ledger_cancels_on_the_shard_that_holds_the_record(
    redis_client: redis.Redis, namespace: str
) -> None:
    sharded = ShardedLedger(redis_client, namespace, "q", 3)
    for i in range(6):
        sharded.admit(f"x{i}", "{}")
    for i in range(6):
        assert sharded.cancel(f"x{i}", by="alice").status is CANCELLED
    assert sharded.claim_many("w", 10) == []
    assert (
        json.loads(sharded.results(["x5"])[0] or b"{}")["attempts"][0]["error"][
            "exception_class_path"
        ]
        == "django_ledger.tasks.Cancelled"
    )


def test_a_queued_record_of_a_keyed_queue_cancelled_is_never_claimed(ledger: Ledger) -> None:
    ledger.set_limits(Limits(key="kwargs.tenant", concurrency=5))
    payload = '{"args":[],"kwargs":{"tenant":"t1"},"options":{},"task":"x.y","v":1}'
    ledger.admit("k1", payload)
    ledger.admit("k2", payload)
    assert ledger.cancel("k1", by="alice").status is CANCELLED
    claims = ledger.claim_many("w", 10, lease=30)
    assert [c.request_id for c in claims] == ["k2"]
    assert ledger.claim_many("w", 10, lease=30) == []
