"""``run_due_tasks()``: what is due runs in-process through the worker's handler, settled."""

from __future__ import annotations

from typing import Any

import pytest

from django_ledger import get_ledger
from django_ledger.core.records import State
from django_ledger.tasks.workflows import chain, get_workflow, sig
from django_ledger.testing import TaskFailed, run_due_tasks
from tests.support.tasks_app import tasks as t
from tests.support.tasks_app import workflow_tasks as w

pytest_plugins = ["django_ledger.testing.pytest_plugin"]


@pytest.fixture(autouse=True)
def _own_ledger(ledger_redis: Any) -> None:
    """Every test here on a ledger of its own."""


def test_a_due_task_runs_and_its_result_is_stored() -> None:
    result = t.add.enqueue(2, 3)
    report = run_due_tasks()
    assert report.completed == [result.id]
    result.refresh()
    assert result.status == "SUCCESSFUL" and result.return_value == 5
    assert result.worker_ids == ["run-due-tasks"]
    assert get_ledger("default").resolve(result.id).state is State.COMPLETED


def test_nothing_due_runs_nothing() -> None:
    assert run_due_tasks().ran == 0


@pytest.mark.django_db
def test_the_task_sees_the_tests_transaction() -> None:
    from django.contrib.auth.models import User

    User.objects.create(username="ada")  # not committed: the test's transaction holds it
    result = t.usernames.enqueue()
    run_due_tasks()
    result.refresh()
    assert result.return_value == ["ada"]


def test_a_chain_runs_to_its_end_in_one_call() -> None:
    flow = chain(sig(w.plus, 0), *[sig(w.plus, more=i) for i in range(1, 5)]).enqueue()
    report = run_due_tasks()
    state = get_workflow(flow.id)
    assert report.ran == 5
    assert state.successful and state.results == {"0": 1, "1": 2, "2": 4, "3": 7, "4": 11}


def test_a_task_that_fails_for_good_raises_with_its_traceback() -> None:
    result = t.async_fail.enqueue("the printer is on fire")  # one attempt, async
    with pytest.raises(TaskFailed) as raised:
        run_due_tasks()
    message = str(raised.value)
    assert "tests.support.tasks_app.tasks.async_fail" in message and result.id in message
    assert "Traceback" in message and "the printer is on fire" in message
    result.refresh()
    assert result.status == "FAILED"


def test_without_raise_errors_a_failure_is_reported() -> None:
    failing = t.complex_exception.enqueue()  # one attempt
    passing = t.add.enqueue(1, 1)
    report = run_due_tasks(raise_errors=False)
    assert report.failed == [failing.id] and report.completed == [passing.id]


def test_a_retry_due_during_the_call_runs_again() -> None:
    result = t.flaky.enqueue(failures=2)  # its backoff is a millisecond or two
    report = run_due_tasks()
    result.refresh()
    assert result.status == "SUCCESSFUL" and result.return_value == 3
    assert report.retrying == [result.id, result.id] and report.completed == [result.id]


def test_only_the_queues_named_run() -> None:
    on_default = t.add.enqueue(1, 2)
    on_emails = t.on_emails.enqueue(7)
    report = run_due_tasks(["emails"])
    assert report.completed == [on_emails.id]
    on_default.refresh()
    assert on_default.status == "READY"


def test_more_runs_than_the_limit_say_so() -> None:
    for n in range(3):
        t.add.enqueue(n, n)
    with pytest.raises(RuntimeError, match="made 2 runs and tasks are still due"):
        run_due_tasks(limit=2)


@pytest.mark.parametrize(
    ("queues", "limit", "error", "match"),
    [
        ("default", 10, TypeError, "not one string"),
        (None, 0, ValueError, "at least 1"),
    ],
)
def test_bad_arguments_are_refused(queues: Any, limit: int, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        run_due_tasks(queues, limit=limit)


def test_a_task_left_waiting_for_its_retry_raises_at_the_end() -> None:
    result = t.fail.enqueue("later")  # the queue's backoff: seconds away
    passing = t.add.enqueue(2, 2)
    with pytest.raises(TaskFailed, match="failed and waits for a retry") as raised:
        run_due_tasks()
    assert "later" in str(raised.value)
    passing.refresh()
    result.refresh()
    assert passing.status == "SUCCESSFUL" and result.status == "READY"
