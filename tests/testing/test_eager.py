"""``OPTIONS["EAGER"]``: each enqueue goes through the ledger, then runs at once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction
from django.test import override_settings

from django_ledger import get_ledger
from django_ledger.core.records import State
from django_ledger.tasks import TaskIdConflict, enqueue_many, enqueue_once
from django_ledger.tasks.workflows import chain, get_workflow, sig
from django_ledger.testing import assert_enqueued
from tests.support.tasks_app import tasks as t
from tests.support.tasks_app import workflow_tasks as w

pytest_plugins = ["django_ledger.testing.pytest_plugin"]

LEDGER_BACKEND = "django_ledger.tasks.LedgerBackend"


def tasks_setting(**options: Any) -> dict[str, Any]:
    return {"default": {"BACKEND": LEDGER_BACKEND, "QUEUES": [], "OPTIONS": options}}


@pytest.fixture(autouse=True)
def eager(ledger_redis: Any) -> Iterator[None]:
    with override_settings(TASKS=tasks_setting(EAGER=True)):
        yield


def test_an_enqueue_runs_at_once_through_the_ledger() -> None:
    result = t.add.enqueue(2, 3)
    assert result.status == "SUCCESSFUL" and result.return_value == 5
    assert get_ledger("default").resolve(result.id).state is State.COMPLETED
    assert_enqueued(t.add, count=0)


def test_a_failure_is_recorded_not_raised() -> None:
    result = t.complex_exception.enqueue()
    assert result.status == "FAILED"
    assert "This task failed" in result.errors[0].traceback


def test_a_unique_repeat_answers_the_run_it_already_made() -> None:
    first = t.unique_add.enqueue(1, 2)
    again = t.unique_add.enqueue(1, 2)
    assert again.id == first.id and again.return_value == 3
    assert again.worker_ids == ["run-due-tasks"]  # one run


def test_enqueue_once_keeps_its_id_and_refuses_other_arguments() -> None:
    first = enqueue_once(t.add, "invoice-7", 1, 1)
    again = enqueue_once(t.add, "invoice-7", 1, 1)
    assert first.id == again.id == "invoice-7" and again.return_value == 2
    with pytest.raises(TaskIdConflict):
        enqueue_once(t.add, "invoice-7", 2, 2)


def test_enqueue_many_runs_every_call() -> None:
    results = enqueue_many(t.add, [([n, n], {}) for n in range(5)])
    assert [result.return_value for result in results] == [0, 2, 4, 6, 8]


def test_a_workflow_runs_to_its_end_at_enqueue() -> None:
    flow = chain(sig(w.plus, 1), sig(w.plus, more=10)).enqueue()
    state = get_workflow(flow.id)
    assert state.successful and state.results == {"0": 2, "1": 12}


def test_a_task_enqueued_by_a_task_runs_after_it_returns() -> None:
    outer = t.enqueues_add.enqueue(20, 22)
    inner_id, status_inside = outer.return_value
    assert status_inside == "READY"  # not run inside the outer task
    inner = t.add.get_result(inner_id)
    assert inner.status == "SUCCESSFUL" and inner.return_value == 42


@pytest.mark.django_db(transaction=True)
def test_an_enqueue_in_a_transaction_runs_when_it_commits() -> None:
    with transaction.atomic():
        result = t.add.enqueue(4, 4)
        assert result.status == "READY"
        assert_enqueued(t.add, count=0)  # staged: not in the ledger before the commit
    result.refresh()
    assert result.status == "SUCCESSFUL" and result.return_value == 8


def test_eager_is_off_by_default() -> None:
    with override_settings(TASKS=tasks_setting()):
        result = t.add.enqueue(1, 1)
    assert result.status == "READY"
    assert_enqueued(t.add, args=[1, 1], count=1)


def test_a_bad_value_is_refused() -> None:
    with (
        override_settings(TASKS=tasks_setting(EAGER="yes")),
        pytest.raises(ImproperlyConfigured, match="EAGER must be True or False"),
    ):
        t.add.enqueue(1, 1)


def test_eager_is_a_deploy_warning_w067() -> None:
    from django.core import checks

    from django_ledger.checks.tasks import check_eager

    [warning] = check_eager()
    assert warning.id == "django_ledger.W067" and warning.obj == "TASKS['default']"
    assert "every task runs in the process that enqueues it" in warning.msg
    with override_settings(TASKS=tasks_setting(EAGER=False)):
        assert check_eager() == []
    assert check_eager in checks.registry.registry.get_checks(include_deployment_checks=True)
    assert check_eager not in checks.registry.registry.get_checks()
