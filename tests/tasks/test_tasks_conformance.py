"""Conformance: what Django documents of a task backend, held against ``LedgerBackend``.

Written from Django's task framework documentation (topics/tasks, ref/tasks, the signals
reference), not copied from its test suite: each test names the behaviour it checks.
Tasks run in a real ``ledger_worker`` process; the test reads them back through the API.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone
from django.utils.module_loading import import_string

from django_ledger.tasks import LedgerBackend
from django_ledger.tasks.compat import (
    DEFAULT_TASK_BACKEND_ALIAS,
    FRAMEWORK,
    InvalidTask,
    Task,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task,
    task_backends,
)
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import WorkerProcess, wait_until

pytest_plugins = ["tests.support.tasks_fixtures"]


def finished(task_: Any, result_id: str) -> Any:
    wait_until(lambda: task_.get_result(result_id).is_finished, timeout=60)
    return task_.get_result(result_id)


# -- the backend's capabilities ("Backends" in the reference) ----------------------------


def test_the_backend_supports_every_feature() -> None:
    backend = task_backends[DEFAULT_TASK_BACKEND_ALIAS]
    assert isinstance(backend, LedgerBackend)
    assert backend.supports_defer and backend.supports_priority
    assert backend.supports_get_result and backend.supports_async_task
    assert backend.alias == "default" and backend.options == {}
    assert backend.queues == set()  # QUEUES [] in the test project: any queue name


def test_an_unknown_backend_alias_is_refused() -> None:
    with pytest.raises(Exception, match=re.escape("The connection 'unknown' doesn't exist.")):
        tasks.add.using(backend="unknown")


# -- defining tasks ("Defining tasks") --------------------------------------------------------


def test_decorated_functions_are_tasks_with_names_and_paths() -> None:
    for declared in (tasks.add, tasks.noop, tasks.async_add):
        assert isinstance(declared, Task)
        assert import_string(declared.module_path) is declared
    assert tasks.add.name == "add"
    assert tasks.add.module_path == "tests.support.tasks_app.tasks.add"


def test_only_module_level_functions_can_be_tasks() -> None:
    def local() -> None:
        """Not at module level."""

    with pytest.raises(
        InvalidTask, match=re.escape("Task function must be defined at a module level.")
    ):
        task()(local)


def test_a_context_task_needs_a_context_argument() -> None:
    with pytest.raises(InvalidTask, match="does not have a first argument of 'context'"):
        task(takes_context=True)(tasks._impl)


def test_using_returns_a_modified_copy() -> None:
    later = tasks.add.using(priority=10, queue_name="emails")
    assert later is not tasks.add and later != tasks.add
    assert (later.priority, later.queue_name) == (10, "emails")
    assert (tasks.add.priority, tasks.add.queue_name) == (0, "default")
    assert later.using(priority=3).queue_name == "emails"  # earlier changes are kept


@pytest.mark.parametrize("priority", [-100, 0, 100])
def test_priorities_within_the_range_are_accepted(priority: int) -> None:
    assert tasks.add.using(priority=priority).priority == priority


def test_a_queue_outside_queues_is_refused() -> None:
    listed = {"default": {"BACKEND": "django_ledger.tasks.LedgerBackend", "QUEUES": ["default"]}}
    with (
        override_settings(TASKS=listed),
        pytest.raises(InvalidTask, match=re.escape("Queue 'queue-2' is not valid for backend.")),
    ):
        tasks.add.using(queue_name="queue-2")


def test_the_task_is_validated_again_at_enqueue(live_namespace: str) -> None:
    narrower = {"default": {"BACKEND": "django_ledger.tasks.LedgerBackend", "QUEUES": ["emails"]}}
    with override_settings(TASKS=narrower):
        with pytest.raises(InvalidTask, match="'default' is not valid"):
            tasks.add.enqueue(1, 2)
        with pytest.raises(InvalidTask, match="'default' is not valid"):
            asyncio.run(tasks.add.aenqueue(1, 2))


def test_call_runs_the_function_in_process() -> None:
    assert tasks.add.call(1, 2) == 3
    assert tasks.async_add.call(1, 2) == 3
    assert asyncio.run(tasks.add.acall(1, 2)) == 3
    assert asyncio.run(tasks.async_add.acall(1, 2)) == 3


# -- enqueueing ("Enqueueing tasks") --------------------------------------------------------


def test_enqueue_returns_a_ready_result(live_namespace: str) -> None:
    result = tasks.noop.enqueue()
    assert result.status == TaskResultStatus.READY
    assert (result.args, result.kwargs) == ([], {})
    assert result.task == tasks.noop and not result.is_finished
    assert result.backend == DEFAULT_TASK_BACKEND_ALIAS


def test_arguments_are_normalised_to_json(live_namespace: str) -> None:
    result = tasks.echo.enqueue((1, 2), {"a": ()}, b"bytes")
    assert result.args == [[1, 2], {"a": []}, "bytes"]


@pytest.mark.parametrize("value", [datetime.now(), object(), {1, 2}])
def test_arguments_that_are_not_json_are_refused(live_namespace: str, value: Any) -> None:
    with pytest.raises(TypeError, match="Unsupported type"):
        tasks.echo.enqueue(value)
    with pytest.raises(TypeError, match="Unsupported type"):
        asyncio.run(tasks.echo.aenqueue(value))


def test_run_after_must_be_aware_with_use_tz(live_namespace: str) -> None:
    with pytest.raises(InvalidTask, match=re.escape("run_after must be an aware datetime.")):
        tasks.add.using(run_after=datetime(2031, 1, 1)).enqueue(1, 2)


def test_refresh_right_after_enqueue_changes_nothing(live_namespace: str) -> None:
    result = tasks.add.using(run_after=timedelta(hours=1)).enqueue(1, 2)
    before = dataclasses.asdict(result)
    result.refresh()
    assert dataclasses.asdict(result) == before
    asyncio.run(result.arefresh())
    assert dataclasses.asdict(result) == before


def test_enqueue_logs_at_debug(live_namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger=FRAMEWORK):
        result = tasks.noop.enqueue()
    lines = [r.getMessage() for r in caplog.records if r.name == FRAMEWORK]
    assert len(lines) == 1 and "enqueued" in lines[0] and result.id in lines[0]


def test_task_enqueued_is_sent_with_the_backend_class(live_namespace: str) -> None:
    from django_ledger.tasks.compat import task_enqueued

    seen: list[tuple[Any, Any]] = []

    def receiver(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append((sender, task_result))

    task_enqueued.connect(receiver)
    try:
        result = tasks.noop.enqueue()
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [(LedgerBackend, result)]


# -- results ("Task results") ---------------------------------------------------------------


@pytest.mark.django_db  # an id not in Redis may wait in the outbox (a table)
def test_get_result_of_an_unknown_id_raises(live_namespace: str) -> None:
    with pytest.raises(TaskResultDoesNotExist):
        tasks.add.get_result("does-not-exist")
    with pytest.raises(TaskResultDoesNotExist):
        asyncio.run(tasks.add.aget_result("does-not-exist"))
    backend = task_backends[DEFAULT_TASK_BACKEND_ALIAS]
    with pytest.raises(TaskResultDoesNotExist):
        backend.get_result("does-not-exist")


def test_a_result_refreshes_to_successful(live_worker: WorkerProcess) -> None:
    result = tasks.add.enqueue(40, 2)
    wait_until(lambda: tasks.add.get_result(result.id).is_finished)
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL and result.is_finished
    assert result.return_value == 42
    assert result.started_at is not None and result.last_attempted_at is not None
    assert result.enqueued_at <= result.started_at <= result.finished_at  # type: ignore[operator]
    assert result.attempts == 1 and result.errors == []
    assert result.args == [40, 2]


def test_an_async_task_result(live_worker: WorkerProcess) -> None:
    async def run() -> Any:
        result = await tasks.async_add.aenqueue(40, 2)
        for _ in range(6000):
            await result.arefresh()
            if result.is_finished:
                break
            await asyncio.sleep(0.01)
        return result

    result = asyncio.run(run())
    assert result.status == TaskResultStatus.SUCCESSFUL and result.return_value == 42


def test_a_none_return_value_is_a_return_value(live_worker: WorkerProcess) -> None:
    done = finished(tasks.noop, tasks.noop.enqueue(1, two=3).id)
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value is None


def test_a_failed_task_keeps_its_error(live_worker: WorkerProcess) -> None:
    failed = finished(tasks.picky, tasks.picky.enqueue("builtins.ValueError").id)
    assert failed.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match="Task failed"):
        _ = failed.return_value
    assert failed.errors[0].exception_class is ValueError
    assert failed.errors[0].traceback.endswith("ValueError: picky\n")


def test_an_async_failure_is_a_failure(live_worker: WorkerProcess) -> None:
    failed = finished(tasks.async_fail, tasks.async_fail.enqueue("no luck").id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[-1].traceback.endswith("ValueError: no luck\n")


def test_system_exit_fails_the_task(live_worker: WorkerProcess) -> None:
    failed = finished(tasks.exit_task, tasks.exit_task.enqueue().id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class is SystemExit


def test_a_complex_exception_shows_in_the_traceback(live_worker: WorkerProcess) -> None:
    result = tasks.complex_exception.enqueue()
    failed = finished(tasks.complex_exception, result.id)
    assert 'ValueError(ValueError("This task failed"))' in failed.errors[-1].traceback
    assert failed._return_value is None


def test_a_return_value_that_is_not_json_fails_the_task(live_worker: WorkerProcess) -> None:
    failed = finished(tasks.lambda_result, tasks.lambda_result.enqueue().id)
    assert failed.status == TaskResultStatus.FAILED
    assert failed.errors[0].exception_class is TypeError
    assert "Unsupported type" in failed.errors[0].traceback


def test_a_context_task_sees_its_result_and_attempt(live_worker: WorkerProcess) -> None:
    result = tasks.context_of.enqueue()
    done = finished(tasks.context_of, result.id)
    assert done.return_value["id"] == result.id
    assert done.return_value["attempt"] == 1


def test_a_deferred_task_waits_for_run_after(live_worker: WorkerProcess) -> None:
    when = timezone.now() + timedelta(seconds=1)
    result = tasks.add.using(run_after=when).enqueue(1, 1)
    done = finished(tasks.add, result.id)
    assert done.started_at >= when
    # The due time the server set (none when a loaded machine admitted it after `when`:
    # then it was due at once).
    if result.task.run_after is not None:
        assert done.started_at >= result.task.run_after
