"""Workflows in the core past a step's first run.

A waiting step's id belongs to its workflow; parents purged before their children's
release still pass their results on; a graph and a callback's inputs are bounded; and
operator retries of steps, in running and in cancelled workflows, release what follows.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from django_ledger import Ledger, State
from django_ledger.core.flows import (
    MAX_FLOW_EDGES,
    MAX_STEP_INPUT_BYTES,
    admit_workflow,
    cancel_workflow,
    read_workflow,
)
from django_ledger.operations import purge, retry_now, snapshot
from tests.core.test_flows import (
    ADMITTED,
    CONFLICT,
    claim_all,
    error_doc,
    result_doc,
    states,
    step,
)
from tests.support.ledger_helpers import expire_and_repair

pytest_plugins = ["tests.support.ledger_fixtures"]


@pytest.fixture
def optimized() -> bool:
    """The fused path: workflows run there only (a reference ledger refuses them)."""
    return True


def retry(ledger: Ledger, request_id: str) -> None:
    shown = snapshot(ledger, request_id)
    assert shown is not None
    retry_now(ledger, request_id, shown.version)


def errors_of(ledger: Ledger, flow: str, name: str) -> str:
    status = read_workflow(ledger, flow)
    assert status is not None
    return (status.step(name).result or b"").decode()


# -- a waiting step's id belongs to its workflow ------------------------------------------


def test_no_admission_takes_a_waiting_steps_id(ledger: Ledger) -> None:
    admit_workflow(ledger, "order-42", [step("fetch"), step("amount", "fetch")])
    forged = '{"args":[1000000],"name":"amount"}'
    answer = ledger.admit("order-42:amount", forged)
    assert (answer.status, answer.reason) == (CONFLICT, "workflow_step")
    answers = ledger.admit_many([("order-42:amount", forged), ("x:other", "x")])
    assert [(a.status, a.reason) for a in answers] == [
        (CONFLICT, "workflow_step"),
        (ADMITTED, None),
    ]
    ledger.close_gate()
    imported = ledger.import_record("order-42:amount", forged, State.PENDING, 0)
    ledger.open_gate()
    assert (imported.status, imported.reason) == (CONFLICT, "workflow_step")
    assert states(ledger, "order-42") == {"fetch": "PENDING", "amount": "WAITING"}
    # Only the workflow writes it: its parent's settlement releases it with its result.
    claims = claim_all(ledger)
    assert set(claims) == {"fetch", "other"}
    ledger.settle(claims["fetch"], State.COMPLETED, result=result_doc(42))
    assert json.loads(claim_all(ledger)["amount"].payload)["args"] == [42]


# -- purged parents -------------------------------------------------------------------------


def test_a_parent_purged_before_the_release_still_passes_its_result(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(max_retained=1)  # an ended record goes with the next one
    admit_workflow(ledger, "busy", [step("fast"), step("slow"), step("cb", "fast", "slow")])
    ledger.admit("x:other", "x")
    first = claim_all(ledger)
    ledger.settle(first["fast"], State.COMPLETED, result=result_doc({"n": 1}))
    ledger.settle(first["other"], State.COMPLETED)
    assert ledger.resolve("busy:fast") is None  # purged: MAX_RETAINED
    ledger.settle(first["slow"], State.COMPLETED, result=result_doc({"n": 2}))
    assert json.loads(claim_all(ledger)["cb"].payload)["args"] == [{"n": 1}, {"n": 2}]
    # What was kept for the callback goes once it is released.
    fields = {f.decode() for f in ledger.redis.hkeys(ledger.runner.flows_key)}
    assert not any(f.startswith(("o:", "w:")) for f in fields)


def test_a_parent_purged_by_retention_repair_still_passes_its_result(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(retention=1)
    admit_workflow(ledger, "late", [step("a"), step("b"), step("c", "a", "b", inputs="list")])
    first = claim_all(ledger)
    ledger.settle(first["a"], State.COMPLETED, result=result_doc("A"))
    assert expire_and_repair(ledger, 5_000).purged == 1  # a, past its retention
    ledger.renew(first["b"], lease=60)
    ledger.settle(first["b"], State.COMPLETED, result=result_doc("B"))
    c = claim_all(ledger)["c"]
    assert json.loads(c.payload)["args"] == [["A", "B"]]
    ledger.settle(c, State.COMPLETED, result=result_doc("C"))
    expire_and_repair(ledger, 10_000)
    assert read_workflow(ledger, "late") is None
    assert ledger.redis.hlen(ledger.runner.flows_key) == 0  # what was kept went too


def test_a_step_whose_purged_parent_left_no_result_fails_naming_it(ledger: Ledger) -> None:
    admit_workflow(ledger, "lost", [step("a"), step("b"), step("c", "a", "b"), step("d", "c")])
    first = claim_all(ledger)
    ledger.settle(first["a"], State.COMPLETED, result=result_doc("A"))
    ledger.settle(first["b"], State.FAILED, result=error_doc("ValueError: boom"))
    shown = snapshot(ledger, "lost:a")
    assert shown is not None
    purge(ledger, "lost:a", shown.version)  # nothing waited for it then: nothing kept
    retry(ledger, "lost:b")  # c waits again, for b
    ledger.settle(claim_all(ledger)["b"], State.COMPLETED, result=result_doc("B"))
    assert claim_all(ledger) == {}
    assert states(ledger, "lost") == {
        "a": "GONE",
        "b": "COMPLETED",
        "c": "FAILED",
        "d": "CANCELLED",
    }
    assert "StepReleaseFailed: parent step lost:a was purged" in errors_of(ledger, "lost", "c")


# -- bounds ---------------------------------------------------------------------------------


def test_a_graph_past_the_edge_bound_is_refused_before_anything_is_written(
    ledger: Ledger,
) -> None:
    names = [f"s{i}" for i in range(450)]  # every step after every earlier one
    steps = [step(n, *names[:i]) for i, n in enumerate(names)]
    assert sum(len(s.parents) for s in steps) > MAX_FLOW_EDGES
    with pytest.raises(ValueError, match="at most 100,000 parent links"):
        admit_workflow(ledger, "pairs", steps)
    assert read_workflow(ledger, "pairs") is None
    assert ledger.redis.hlen(ledger.runner.flows_key) == 0


def test_a_callback_whose_inputs_pass_the_bound_fails_and_cancels_what_follows(
    ledger: Ledger,
) -> None:
    names = ["g0", "g1", "g2"]
    steps = [step(n) for n in names] + [step("cb", *names, inputs="list"), step("after", "cb")]
    admit_workflow(ledger, "big", steps)
    claims = claim_all(ledger)
    big = "x" * (MAX_STEP_INPUT_BYTES // 3 + 1)
    ledger.settle_many([(claims[n], State.COMPLETED, 0, result_doc(big)) for n in names])
    assert claim_all(ledger) == {}
    assert states(ledger, "big") == {
        "g0": "COMPLETED",
        "g1": "COMPLETED",
        "g2": "COMPLETED",
        "cb": "FAILED",
        "after": "CANCELLED",
    }
    assert "MAX_STEP_INPUT_BYTES" in errors_of(ledger, "big", "cb")
    record = ledger.resolve("big:cb")
    assert record is not None and len(record.payload) < 100  # nothing of the results


def test_a_callback_just_under_the_bound_is_released(ledger: Ledger) -> None:
    admit_workflow(ledger, "fits", [step("a"), step("b", "a")])
    value = "y" * (MAX_STEP_INPUT_BYTES - 100)
    ledger.settle(claim_all(ledger)["a"], State.COMPLETED, result=result_doc(value))
    assert json.loads(claim_all(ledger)["b"].payload)["args"] == [value]


# -- operator retries -----------------------------------------------------------------------


def test_a_retried_step_that_completes_at_once_still_releases_its_dependants(
    ledger: Ledger, monkeypatch: pytest.MonkeyPatch
) -> None:
    admit_workflow(ledger, "fast", [step("a"), step("b", "a"), step("c", "b")])
    ledger.settle(claim_all(ledger)["a"], State.FAILED, result=error_doc("boom"))
    assert states(ledger, "fast")["b"] == "CANCELLED"
    # A worker claims and completes the retried step between any two calls the retry makes.
    run = ledger.runner.run
    done: list[bool] = []

    def racing(script: Any, args: Any) -> Any:
        answer = run(script, args)
        record = ledger.resolve("fast:a")
        if not done and record is not None and record.state is State.PENDING:
            done.append(True)
            ledger.settle(claim_all(ledger)["a"], State.COMPLETED, result=result_doc("A"))
        return answer

    monkeypatch.setattr(ledger.runner, "run", racing)
    retry(ledger, "fast:a")
    monkeypatch.undo()
    assert done
    assert json.loads(claim_all(ledger)["b"].payload)["args"] == ["A"]
    assert states(ledger, "fast") == {"a": "COMPLETED", "b": "CLAIMED", "c": "WAITING"}


def test_a_retry_in_a_cancelled_workflow_runs_that_step_alone(ledger: Ledger) -> None:
    admit_workflow(ledger, "stop", [step("a"), step("b", "a"), step("c", "b")])
    assert cancel_workflow(ledger, "stop") == 3
    retry(ledger, "stop:a")
    assert states(ledger, "stop") == {"a": "PENDING", "b": "CANCELLED", "c": "CANCELLED"}
    ledger.settle(claim_all(ledger)["a"], State.COMPLETED, result=result_doc(1))
    assert claim_all(ledger) == {}
    status = read_workflow(ledger, "stop")
    assert status is not None and status.finished and status.cancelled


def test_a_retry_reopens_only_what_the_retried_steps_ending_cancelled(ledger: Ledger) -> None:
    steps = [step("a"), step("b"), step("c", "a", "b"), step("d", "b")]
    admit_workflow(ledger, "two", steps)
    first = claim_all(ledger)
    ledger.settle(first["b"], State.FAILED, result=error_doc("b failed"))  # cancels c, d
    ledger.settle(first["a"], State.FAILED, result=error_doc("a failed"))
    retry(ledger, "two:a")  # c was cancelled by b: a's retry leaves it
    assert states(ledger, "two")["c"] == "CANCELLED"
    retry(ledger, "two:b")
    assert states(ledger, "two") == {"a": "PENDING", "b": "PENDING", "c": "WAITING", "d": "WAITING"}
