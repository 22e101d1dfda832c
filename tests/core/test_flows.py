"""Workflows in the core (core/flows.py, workflows.lua): admission, release, failure, retry, cancel.

Every test runs on the fused path (the only one with workflows). A step's payload here
is JSON text; its result a result document (core/jobs.py), so the release builds inputs
from return values.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from django_ledger import Claim, Ledger, State
from django_ledger.core.flows import (
    FlowStep,
    admit_workflow,
    cancel_workflow,
    read_workflow,
    reopen_step,
)
from django_ledger.core.results import AdmissionStatus
from django_ledger.operations import mark_failed, retry_now, snapshot
from tests.support.ledger_helpers import count_calls, expire_and_repair

pytest_plugins = ["tests.support.ledger_fixtures"]


@pytest.fixture
def optimized() -> bool:
    """The fused path: workflows run there only (a reference ledger refuses them)."""
    return True


ADMITTED, DUPLICATE = AdmissionStatus.ADMITTED, AdmissionStatus.DUPLICATE
CONFLICT = AdmissionStatus.CONFLICT


def result_doc(value: Any) -> str:
    return json.dumps({"v": 1, "attempts": [], "return_value": value}, separators=(",", ":"))


def error_doc(message: str) -> str:
    attempt = {
        "worker_id": "w",
        "started_at": 1,
        "finished_at": 2,
        "error": {"exception_class_path": "builtins.ValueError", "traceback": message + "\n"},
    }
    return json.dumps({"v": 1, "attempts": [attempt]}, separators=(",", ":"))


def step(name: str, *parents: str, inputs: str = "spread", **kw: Any) -> FlowStep:
    """A step whose payload is {"args":[<inputs>],"name":...}: inputs, if any, go first."""
    if not parents:
        return FlowStep(name, json.dumps({"args": [], "name": name}), **kw)
    return FlowStep(
        name,
        json.dumps({"args": [], "name": name}),
        parents=parents,
        inputs=inputs,
        head='{"args":[',
        tail='],"name":' + json.dumps(name) + "}",
        **kw,
    )


def claim_all(ledger: Ledger) -> dict[str, Claim]:
    claims = ledger.claim_many("w", 128, lease=30)
    return {claim.request_id.split(":", 1)[1]: claim for claim in claims}


def states(ledger: Ledger, flow: str) -> dict[str, str]:
    status = read_workflow(ledger, flow)
    assert status is not None
    return {s.name: s.state for s in status.steps}


def test_a_chain_passes_each_result_on(ledger: Ledger) -> None:
    steps = [step("s0")] + [step(f"s{i}", f"s{i - 1}") for i in range(1, 5)]
    assert admit_workflow(ledger, "f", steps).status is ADMITTED
    assert states(ledger, "f") == {"s0": "PENDING"} | {f"s{i}": "WAITING" for i in range(1, 5)}
    for i in range(5):
        claims = claim_all(ledger)
        assert list(claims) == [f"s{i}"]  # a waiting step is never claimable
        args = json.loads(claims[f"s{i}"].payload)["args"]
        assert args == ([] if i == 0 else [i - 1])
        ledger.settle(claims[f"s{i}"], State.COMPLETED, result=result_doc(i))
    assert ledger.claim_many("w", 10) == []
    assert set(states(ledger, "f").values()) == {"COMPLETED"}


def test_a_chord_callback_gets_the_results_in_group_order(ledger: Ledger) -> None:
    names = [f"g{i}" for i in range(40)]
    steps = [step(n) for n in names] + [step("cb", *names, inputs="list")]
    assert admit_workflow(ledger, "c", steps).status is ADMITTED
    claims = claim_all(ledger)
    assert set(claims) == set(names)
    # Settle in reverse order, half in one batch: the order of results is the group's.
    items = [(claims[n], State.COMPLETED, 0, result_doc({"n": n})) for n in reversed(names)]
    ledger.settle_many(items[:20])
    assert claim_all(ledger) == {}
    ledger.settle_many(items[20:])
    callback = claim_all(ledger)
    assert list(callback) == ["cb"]
    assert json.loads(callback["cb"].payload)["args"] == [[{"n": n} for n in names]]


def test_a_diamond_releases_the_child_once_after_both(ledger: Ledger) -> None:
    steps = [step("a"), step("b", "a"), step("c", "a"), step("d", "b", "c")]
    admit_workflow(ledger, "d", steps)
    ledger.settle(claim_all(ledger)["a"], State.COMPLETED, result=result_doc(1))
    middle = claim_all(ledger)
    assert set(middle) == {"b", "c"}
    ledger.settle(middle["c"], State.COMPLETED, result=result_doc("c"))
    assert claim_all(ledger) == {}
    ledger.settle(middle["b"], State.COMPLETED, result=result_doc("b"))
    last = claim_all(ledger)
    assert list(last) == ["d"]
    assert json.loads(last["d"].payload)["args"] == ["b", "c"]  # in parent order


def test_admission_is_idempotent_also_from_eight_threads(ledger: Ledger) -> None:
    steps = [step("a"), step("b"), step("c", "a", "b")]
    answers: list[AdmissionStatus] = []
    barrier = threading.Barrier(8)

    def admit() -> None:
        barrier.wait()
        answers.append(admit_workflow(ledger, "t", steps).status)

    threads = [threading.Thread(target=admit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(a.name for a in answers) == ["ADMITTED"] + ["DUPLICATE"] * 7
    assert set(claim_all(ledger)) == {"a", "b"}
    assert admit_workflow(ledger, "t", steps).status is DUPLICATE
    other = admit_workflow(ledger, "t", [step("a")])
    assert (other.status, other.reason) == (AdmissionStatus.CONFLICT, "workflow_differs")


def test_a_step_id_already_in_the_queue_is_a_conflict(ledger: Ledger) -> None:
    ledger.admit("x:a", "p")
    answer = admit_workflow(ledger, "x", [step("a"), step("b", "a")])
    assert (answer.status, answer.reason) == (AdmissionStatus.CONFLICT, "step_exists: x:a")
    assert read_workflow(ledger, "x") is None


def test_bad_steps_are_refused_before_anything_is_written(ledger: Ledger) -> None:
    with pytest.raises(ValueError, match="not an earlier step"):
        admit_workflow(ledger, "b", [step("a", "z")])
    with pytest.raises(ValueError, match="given twice"):
        admit_workflow(ledger, "b", [step("a"), step("a")])
    with pytest.raises(ValueError, match="on_failure"):
        admit_workflow(ledger, "b", [step("a"), step("b", "a", on_failure="ignore")])
    assert read_workflow(ledger, "b") is None


def test_a_full_queue_refuses_the_whole_workflow(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_records=3)
    answer = admit_workflow(ledger, "big", [step("a"), step("b", "a"), step("c", "b"), step("d")])
    assert answer.status is AdmissionStatus.FULL
    assert ledger.claim_many("w", 10) == []


def test_a_failure_cancels_its_dependants_and_continue_ones_run(ledger: Ledger) -> None:
    steps = [
        step("a"),
        step("b", "a"),  # cancel (the default)
        step("c", "b"),  # cancelled transitively
        step("d", "a", on_failure="continue"),
        step("e", "c", on_failure="continue"),  # its parent was cancelled: it runs
    ]
    admit_workflow(ledger, "x", steps)
    ledger.settle(claim_all(ledger)["a"], State.FAILED, result=error_doc("ValueError: boom"))
    got = states(ledger, "x")
    assert got == {
        "a": "FAILED",
        "b": "CANCELLED",
        "c": "CANCELLED",
        "d": "PENDING",
        "e": "PENDING",
    }
    status = read_workflow(ledger, "x")
    assert status is not None
    b = status.step("b")
    assert b.cancelled_by == "x:a"
    assert b.result is not None and b"x:a ended FAILED: ValueError: boom" in b.result
    assert b"x:b ended FAILED" in (status.step("c").result or b"")
    runnable = claim_all(ledger)
    assert set(runnable) == {"d", "e"}
    assert json.loads(runnable["d"].payload)["args"] == [None]  # the failed parent: null


def test_a_retry_keeps_the_steps_place(ledger: Ledger) -> None:
    admit_workflow(ledger, "r", [step("a"), step("b", "a")])
    ledger.settle(claim_all(ledger)["a"], State.PENDING)  # a retry, due now
    assert states(ledger, "r") == {"a": "PENDING", "b": "WAITING"}
    ledger.settle(claim_all(ledger)["a"], State.COMPLETED, result=result_doc(7))
    assert json.loads(claim_all(ledger)["b"].payload)["args"] == [7]


def test_a_step_that_dies_in_repair_cancels_its_dependants(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(max_attempts=1)
    admit_workflow(ledger, "k", [step("a"), step("b", "a")])
    claim_all(ledger)
    expire_and_repair(ledger, 60_000)
    assert states(ledger, "k") == {"a": "DEAD", "b": "CANCELLED"}
    status = read_workflow(ledger, "k")
    assert status is not None
    assert b"ended DEAD" in (status.step("b").result or b"")


def test_an_operator_retry_of_a_failed_step_lets_the_workflow_go_on(ledger: Ledger) -> None:
    admit_workflow(ledger, "o", [step("a"), step("b"), step("c", "a", "b"), step("d", "c")])
    first = claim_all(ledger)
    ledger.settle(first["b"], State.COMPLETED, result=result_doc("B"))
    ledger.settle(first["a"], State.FAILED, result=error_doc("boom"))
    assert states(ledger, "o")["d"] == "CANCELLED"
    shown = snapshot(ledger, "o:a")
    assert shown is not None
    retry_now(ledger, "o:a", shown.version)  # its cancelled dependants wait again
    assert reopen_step(ledger, "o:a") == 0  # already done: nothing more
    assert states(ledger, "o") == {"a": "PENDING", "b": "COMPLETED", "c": "WAITING", "d": "WAITING"}
    ledger.settle(claim_all(ledger)["a"], State.COMPLETED, result=result_doc("A"))
    c = claim_all(ledger)["c"]
    assert json.loads(c.payload)["args"] == ["A", "B"]
    ledger.settle(c, State.COMPLETED, result=result_doc("C"))
    assert json.loads(claim_all(ledger)["d"].payload)["args"] == ["C"]


def test_an_operator_failure_moves_the_workflow_on(ledger: Ledger) -> None:
    admit_workflow(ledger, "m", [step("a"), step("b", "a", on_failure="continue")])
    shown = snapshot(ledger, "m:a")
    assert shown is not None
    mark_failed(ledger, "m:a", shown.version)
    assert states(ledger, "m") == {"a": "FAILED", "b": "PENDING"}


def test_cancel_ends_the_steps_not_started(ledger: Ledger) -> None:
    admit_workflow(ledger, "z", [step("a"), step("b"), step("c", "a"), step("d", "c")])
    running = ledger.claim("w")
    assert running is not None and running.request_id == "z:a"
    assert cancel_workflow(ledger, "z") == 3  # b (PENDING), c and d (waiting)
    assert cancel_workflow(ledger, "nope") is None
    assert states(ledger, "z") == {
        "a": "CLAIMED",
        "b": "CANCELLED",
        "c": "CANCELLED",
        "d": "CANCELLED",
    }
    ledger.settle(running, State.COMPLETED, result=result_doc(1))
    assert ledger.claim_many("w", 10) == []
    status = read_workflow(ledger, "z")
    assert status is not None and status.cancelled and status.finished


def test_a_purged_workflow_leaves_nothing_behind(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(retention=1)
    admit_workflow(ledger, "p", [step("a"), step("b", "a")])
    ledger.settle(claim_all(ledger)["a"], State.COMPLETED, result=result_doc(1))
    ledger.settle(claim_all(ledger)["b"], State.COMPLETED, result=result_doc(2))
    expire_and_repair(ledger, 5_000)
    assert read_workflow(ledger, "p") is None
    assert ledger.redis.hlen(ledger.runner.flows_key) == 0
    # After its retention, the same id is a new workflow, as a request id is.
    assert admit_workflow(ledger, "p", [step("a")]).status is ADMITTED


def test_a_released_payload_is_exactly_head_inputs_tail(ledger: Ledger) -> None:
    tail = '],"note":' + json.dumps('é🎉\u2028\\"\x00', ensure_ascii=False) + "}"
    steps = [
        step("a"),
        FlowStep("b", "{}", parents=("a",), inputs="list", head='{"args":[', tail=tail),
    ]
    admit_workflow(ledger, "u", steps)
    value = {"text": "ü\n🎉", "big": 2**63, "float": 0.1}
    doc = '{"v":1,"attempts":[],"return_value":' + json.dumps(value, ensure_ascii=False) + "}"
    ledger.settle(claim_all(ledger)["a"], State.COMPLETED, result=doc)
    released = claim_all(ledger)["b"].payload
    assert released == '{"args":[[' + json.dumps(value, ensure_ascii=False) + "]" + tail


def test_the_last_parents_settlement_releases_and_claims_the_child_in_one_call(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    admit_workflow(ledger, "one", [step("a"), step("b"), step("c", "a", "b")])
    first = claim_all(ledger)
    ledger.settle(first["a"], State.COMPLETED, result=result_doc("A"))
    with count_calls(redis_client) as counted:
        _, claims = ledger.settle_and_claim(
            [(first["b"], State.COMPLETED, 0, result_doc("B"))], "w", 10
        )
    assert [c.request_id for c in claims] == ["one:c"]
    assert json.loads(claims[0].payload)["args"] == ["A", "B"]
    assert counted.fcall == 1  # settle, release and claim: one round trip


def test_repair_never_makes_a_waiting_step_claimable(ledger: Ledger) -> None:
    admit_workflow(ledger, "w", [step("a"), step("b", "a"), step("c", "b")])
    claim_all(ledger)
    report = expire_and_repair(ledger, 3_600_000)  # every lease long expired
    assert report.reindexed == 0
    assert set(claim_all(ledger)) == {"a"}  # given back; b and c still wait
    assert states(ledger, "w") == {"a": "CLAIMED", "b": "WAITING", "c": "WAITING"}
