"""Workflows of Django tasks through a real ``ledger_worker`` process (tasks/workflows.py).

What a user checks: the results each step got (its task records what it saw in Redis),
that a callback ran exactly once, and the workflow's state as ``get_workflow`` reads it.
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any

import pytest

from django_ledger import get_ledger
from django_ledger.operations import retry_now, snapshot
from django_ledger.tasks.workflows import (
    Workflow,
    WorkflowConflict,
    WorkflowDoesNotExist,
    WorkflowState,
    cancel_workflow,
    chain,
    chord,
    get_workflow,
    group,
    si,
    sig,
)
from tests.support.tasks_app import workflow_tasks as t
from tests.support.tasks_helpers import WorkerProcess, wait_until

pytest_plugins = ["tests.support.tasks_fixtures"]


def finished(workflow_id: str, timeout: float = 60) -> WorkflowState:
    wait_until(lambda: get_workflow(workflow_id).finished, timeout=timeout, step=0.05)
    return get_workflow(workflow_id)


def key() -> str:
    return f"trace-{uuid.uuid4().hex}"


def traces(name: str) -> list[Any]:
    return [json.loads(item) for item in get_ledger("default").redis.lrange(name, 0, -1)]


def test_a_chain_of_ten_passes_each_result_on(live_worker: WorkerProcess) -> None:
    flow = chain(sig(t.plus, 0), *[sig(t.plus, more=i) for i in range(1, 10)]).enqueue()
    state = finished(flow.id)
    # step 0: 0 + 1; step i: the previous result + i
    expected, total = {}, 1
    expected["0"] = 1
    for i in range(1, 10):
        total += i
        expected[str(i)] = total
    assert state.successful and state.results == expected


def test_a_chord_of_a_thousand_gets_every_result_in_order_once(live_worker: WorkerProcess) -> None:
    trace = key()
    header = group(sig(t.square, n) for n in range(1000))
    flow = chord(header, sig(t.collect, key=trace).set(name="callback")).enqueue(id=key())
    state = finished(flow.id, timeout=120)
    assert state.successful
    assert state.step("callback").return_value == 1000
    assert traces(trace) == [[n * n for n in range(1000)]]  # one call, all results, in order


def test_a_diamond_runs_its_child_once_after_both_parents(live_worker: WorkerProcess) -> None:
    trace = key()
    graph = Workflow()
    a = graph.add(sig(t.plus, 1), name="a")
    b = graph.add(sig(t.plus, more=10), after=[a], name="b")
    c = graph.add(sig(t.square), after=[a], name="c")
    graph.add(sig(t.seen, key=trace), after=[b, c], name="d")
    state = finished(graph.enqueue().id)
    assert state.results == {"a": 2, "b": 12, "c": 4, "d": [12, 4]}
    assert traces(trace) == [[12, 4]]


def test_a_failure_cancels_its_dependants_and_a_continue_one_runs(
    live_worker: WorkerProcess,
) -> None:
    cancelled, continued = key(), key()
    graph = Workflow()
    a = graph.add(si(t.broken, "boom"), name="a")
    b = graph.add(sig(t.seen, key=cancelled), after=[a], name="b")
    graph.add(si(t.seen, key=cancelled), after=[b], name="c")
    graph.add(sig(t.seen, key=continued), after=[a], name="d", on_failure="continue")
    state = finished(graph.enqueue().id)
    assert [(s.name, s.state) for s in state.steps] == [
        ("a", "FAILED"),
        ("b", "CANCELLED"),
        ("c", "CANCELLED"),
        ("d", "COMPLETED"),
    ]
    assert state.step("a").errors == ["ValueError: boom"]
    assert state.step("b").errors == [
        f"StepCancelled: parent step {state.id}:a ended FAILED: ValueError: boom"
    ]
    assert state.step("b").cancelled_by == f"{state.id}:a"
    assert traces(cancelled) == []
    assert traces(continued) == [[None]]  # the failed parent's result: None


def test_building_a_workflow_twice_and_from_eight_threads_admits_each_step_once(
    live_worker: WorkerProcess,
) -> None:
    trace = key()
    flow_id = key()
    shape = chain(si(t.seen, 1, key=trace), si(t.seen, 2, key=trace), si(t.seen, 3, key=trace))
    answers: list[bool] = []
    barrier = threading.Barrier(8)

    def build() -> None:
        barrier.wait()
        answers.append(shape.enqueue(id=flow_id).created)

    threads = [threading.Thread(target=build) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(answers) == [False] * 7 + [True]
    finished(flow_id)
    assert shape.enqueue(id=flow_id).created is False  # again, after it ran: nothing
    assert traces(trace) == [[1], [2], [3]]
    with pytest.raises(WorkflowConflict):
        chain(si(t.seen, 9, key=trace)).enqueue(id=flow_id)


def test_an_operator_retry_of_the_failed_step_lets_the_workflow_go_on(
    live_worker: WorkerProcess,
) -> None:
    door, trace = key(), key()
    flow = chain(si(t.opens, door), sig(t.seen, key=trace), sig(t.seen, key=trace)).enqueue()
    state = finished(flow.id)
    assert [s.state for s in state.steps] == ["FAILED", "CANCELLED", "CANCELLED"]
    ledger = get_ledger("default")
    get_ledger("default").redis.set(door, b"1")
    shown = snapshot(ledger, flow.task_ids["0"])
    assert shown is not None
    retry_now(ledger, flow.task_ids["0"], shown.version)  # what the admin's retry does
    state = finished(flow.id)
    assert state.results == {"0": "open", "1": ["open"], "2": [["open"]]}
    assert traces(trace) == [["open"], [["open"]]]


def test_cancel_ends_the_steps_not_started(live_worker: WorkerProcess) -> None:
    release, trace = key(), key()
    flow = chain(si(t.hold, release), si(t.seen, key=trace), si(t.seen, key=trace)).enqueue()
    wait_until(lambda: flow.status().step("0").state == "CLAIMED")
    assert cancel_workflow(flow.id) == 2
    get_ledger("default").redis.rpush(release, b"go")
    state = finished(flow.id)
    assert [s.state for s in state.steps] == ["COMPLETED", "CANCELLED", "CANCELLED"]
    assert state.cancelled and traces(trace) == []
    with pytest.raises(WorkflowDoesNotExist):
        get_workflow("no-such-workflow")


def test_a_chord_passes_on_results_nested_as_deep_as_a_task_may_return(
    live_worker: WorkerProcess,
) -> None:
    trace = key()
    deepest = 64  # MAX_PAYLOAD_DEPTH: the callback's own object, args and list add three
    header = group(sig(t.nested, deepest) for _ in range(2))
    flow = chord(header, sig(t.collect, key=trace).set(name="callback")).enqueue(id=key())
    state = finished(flow.id)
    assert state.successful, [(s.name, s.state, s.errors) for s in state.steps]
    assert state.step("callback").return_value == 2
    got = traces(trace)[0]
    levels, value = 1, got[0]
    while value:
        levels, value = levels + 1, value[0]
    assert levels == deepest
