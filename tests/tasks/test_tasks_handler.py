"""``TaskHandler`` in-process: each attempt's plan, run, outcome, result and signals.

Claims come from the ledger and outcomes go back to it as a worker would settle them
(``tasks_helpers.run_claimed``); the worker tests run the same through real workers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import override_settings

from django_ledger import get_ledger
from django_ledger.core.jobs import BadPayload, encode_task
from django_ledger.core.records import State
from django_ledger.core.worker.handler import Job
from django_ledger.tasks import ResultTooLarge, UnknownTask
from django_ledger.tasks.compat import (
    FRAMEWORK,
    TaskResultStatus,
    task_finished,
    task_started,
)
from django_ledger.tasks.handler import TaskHandler, TaskPlan
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_claimed, run_until_settled, task_settings

pytest_plugins = ["tests.support.tasks_fixtures"]


class Signals:
    """Record ``task_started`` and ``task_finished`` while in the ``with`` block."""

    def __init__(self) -> None:
        self.events: list[tuple[str, type, str, TaskResultStatus, int, int]] = []

    def _on(self, name: str) -> Any:
        def receiver(sender: type, task_result: Any, **kwargs: Any) -> None:
            self.events.append(
                (
                    name,
                    sender,
                    task_result.id,
                    task_result.status,
                    task_result.attempts,
                    len(task_result.errors),
                )
            )

        return receiver

    def __enter__(self) -> Signals:
        self._started, self._finished = self._on("started"), self._on("finished")
        task_started.connect(self._started, weak=False)
        task_finished.connect(self._finished, weak=False)
        return self

    def __exit__(self, *exc: object) -> None:
        task_started.disconnect(self._started)
        task_finished.disconnect(self._finished)


def admit_raw(payload: str, request_id: str = "raw-1", queue: str = "default") -> None:
    assert get_ledger(queue).admit(request_id, payload).accepted


def job_of(payload: str) -> Job:
    admit_raw(payload)
    claim = get_ledger("default").claim("w")
    assert claim is not None
    return Job(claim=claim, queue="default", worker_id="w", started_at=claim.lease_until - 30_000)


# -- plan: a payload's path is looked up, never called --------------------------------


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("tests.support.tasks_app.tasks.not_a_task", "is not a task"),
        ("tests.support.tasks_app.tasks._impl", "is not a task"),
        ("os.system", "is not a task"),
        ("antigravity.fly", "not in an installed app's package"),
        ("tests.support.tasks_app.nowhere.task", "not in an installed app's package"),
        ("not a path", "not the dotted path"),
    ],
)
def test_plan_refuses_what_is_not_a_task(task_namespace: str, path: str, why: str) -> None:
    import sys

    job = job_of(encode_task(path, [], {}))
    with pytest.raises(UnknownTask, match=why):
        TaskHandler("default").plan(job)
    assert "antigravity" not in sys.modules


def test_plan_refuses_a_payload_that_is_not_a_task_document(task_namespace: str) -> None:
    with pytest.raises(BadPayload):
        TaskHandler("default").plan(job_of('{"hello": "world"}'))


def test_plan_says_how_to_run_the_task(task_namespace: str) -> None:
    handler = TaskHandler("default")
    plan = handler.plan(job_of(encode_task("tests.support.tasks_app.tasks.hangs", [], {})))
    assert isinstance(plan, TaskPlan)
    assert (plan.name, plan.is_async, plan.timeout) == (
        "tests.support.tasks_app.tasks.hangs",
        True,
        0.2,
    )
    assert plan.lease == 30.0  # the queue's LEASE
    assert plan.options is not None and plan.options.max_attempts == 2


def test_a_handler_needs_a_backend_that_serves_its_queue(task_namespace: str) -> None:
    from django.core.exceptions import ImproperlyConfigured

    listed = {"default": {"BACKEND": "django_ledger.tasks.LedgerBackend", "QUEUES": ["emails"]}}
    with override_settings(TASKS=listed):
        with pytest.raises(ImproperlyConfigured, match="serves queue 'elsewhere'"):
            TaskHandler("elsewhere")
        assert TaskHandler("emails").backend_alias == "default"


# -- run: one attempt ---------------------------------------------------------------------


def test_a_returning_task_completes_with_its_result(task_namespace: str) -> None:
    result = tasks.echo.enqueue(1, [2], three={"four": 4})
    with Signals() as seen:
        ran = run_claimed(worker_id="w-1")
    assert ran is not None
    _, outcome, settlement = ran
    assert outcome.state is State.COMPLETED and settlement.ok
    document = json.loads(outcome.result or "")
    assert document["return_value"] == {"args": [1, [2]], "kwargs": {"three": {"four": 4}}}
    assert [a["worker_id"] for a in document["attempts"]] == ["w-1"]
    from django_ledger.tasks import LedgerBackend

    assert seen.events == [
        ("started", LedgerBackend, result.id, TaskResultStatus.RUNNING, 1, 0),
        ("finished", LedgerBackend, result.id, TaskResultStatus.SUCCESSFUL, 1, 0),
    ]
    done = tasks.echo.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == document["return_value"]
    assert done.worker_ids == ["w-1"]
    assert done.enqueued_at <= done.started_at <= done.finished_at  # type: ignore[operator]
    assert done.started_at == done.last_attempted_at


def test_a_coroutine_task_runs_as_an_awaitable(task_namespace: str) -> None:
    result = tasks.async_add.enqueue(3, 4)
    ran = run_claimed()
    assert ran is not None and ran[1].state is State.COMPLETED
    assert tasks.async_add.get_result(result.id).return_value == 7


def test_a_raising_task_retries_then_fails(task_namespace: str) -> None:
    result = tasks.always_fails.enqueue()
    with Signals() as seen:
        outcomes = run_until_settled()
    assert [o.state for o in outcomes] == [State.PENDING, State.PENDING, State.FAILED]
    assert all(0 <= o.delay <= 0.002 for o in outcomes[:2])  # the task's backoff cap
    assert {o.reason for o in outcomes} == {"builtins.ConnectionError"}
    finished = [event[3] for event in seen.events if event[0] == "finished"]
    assert finished == [TaskResultStatus.READY, TaskResultStatus.READY, TaskResultStatus.FAILED]
    failed = tasks.always_fails.get_result(result.id)
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 3
    assert [e.exception_class for e in failed.errors] == [ConnectionError] * 3
    assert [e.traceback.splitlines()[-1] for e in failed.errors] == [
        f"ConnectionError: attempt {n}" for n in (1, 2, 3)
    ]
    with pytest.raises(ValueError, match="Task failed"):
        _ = failed.return_value


def test_a_retried_task_shows_every_attempt(task_namespace: str) -> None:
    result = tasks.flaky.enqueue(2)
    run_until_settled()
    done = tasks.flaky.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert done.return_value == 3 and done.attempts == 3 and len(done.errors) == 2
    assert done.started_at < done.last_attempted_at  # type: ignore[operator]


@pytest.mark.parametrize(
    ("kind", "states"),
    [
        ("builtins.ConnectionError", [State.PENDING] * 4 + [State.FAILED]),
        ("builtins.ValueError", [State.FAILED]),
    ],
)
def test_only_the_exceptions_of_retry_on_retry(
    task_namespace: str, kind: str, states: list[State]
) -> None:
    tasks.picky.enqueue(kind)
    assert [outcome.state for outcome in run_until_settled()] == states


def test_system_exit_fails_at_once_as_in_django(task_namespace: str) -> None:
    result = tasks.exit_task.enqueue()
    assert [o.state for o in run_until_settled()] == [State.FAILED]
    assert tasks.exit_task.get_result(result.id).errors[0].exception_class is SystemExit


def test_a_return_value_that_is_not_json_fails_without_retrying(task_namespace: str) -> None:
    result = tasks.lambda_result.enqueue()
    assert [o.state for o in run_until_settled()] == [State.FAILED]
    failed = tasks.lambda_result.get_result(result.id)
    assert failed.errors[0].exception_class is TypeError
    assert "Unsupported type" in failed.errors[0].traceback
    assert "The return value of tests.support.tasks_app.tasks.lambda_result cannot be stored" in (
        failed.errors[0].traceback
    )
    assert failed._return_value is None  # type: ignore[attr-defined]


def test_a_return_value_that_refers_to_itself_fails_saying_so(task_namespace: str) -> None:
    result = tasks.cyclic_result.enqueue()
    assert [o.state for o in run_until_settled()] == [State.FAILED]
    failed = tasks.cyclic_result.get_result(result.id)
    assert failed.errors[0].exception_class is ValueError
    assert "return value of tests.support.tasks_app.tasks.cyclic_result refers to itself" in (
        failed.errors[0].traceback
    )


def test_a_return_value_nested_past_the_bound_fails_saying_so(task_namespace: str) -> None:
    result = tasks.deep_result.enqueue()
    assert [o.state for o in run_until_settled()] == [State.FAILED]
    failed = tasks.deep_result.get_result(result.id)
    assert "nests deeper than 64 levels" in failed.errors[0].traceback


@pytest.fixture
def small_results(task_namespace: str) -> Iterator[None]:
    backends = {
        "default": {
            "BACKEND": "django_ledger.tasks.LedgerBackend",
            "QUEUES": ["default", "emails", "reports"],
            "OPTIONS": {"MAX_RESULT_BYTES": 100},
        }
    }
    with override_settings(TASKS=backends):
        yield


def test_a_result_past_max_result_bytes_fails_and_is_not_stored(small_results: None) -> None:
    fits = tasks.sized.enqueue(98)  # "xx...x" with its quotes: 100 bytes of JSON
    too_big = tasks.sized.enqueue(99)
    run_until_settled()
    assert tasks.sized.get_result(fits.id).return_value == "x" * 98
    failed = tasks.sized.get_result(too_big.id)
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 1
    assert failed.errors[0].exception_class is ResultTooLarge
    assert "101 bytes of JSON, over the MAX_RESULT_BYTES (100)" in failed.errors[0].traceback
    stored = get_ledger("default").results([too_big.id])[0]
    assert stored is not None and b"x" * 99 not in stored


def test_the_context_gives_the_attempt_and_the_fence(task_namespace: str) -> None:
    result = tasks.context_of.enqueue()
    ran = run_claimed()
    assert ran is not None
    job = ran[0]
    assert tasks.context_of.get_result(result.id).return_value == {
        "id": result.id,
        "attempt": 1,
        "fence": job.claim.fence,
        "max_attempts": 16,
        "is_last_attempt": False,
    }


def test_the_final_failure_is_logged_as_django_logs_it(
    namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    with task_settings(namespace, default={"MAX_ATTEMPTS": 1}):
        result = tasks.fail.enqueue("a message to find")
        with caplog.at_level(logging.DEBUG, logger=FRAMEWORK):
            run_until_settled()
    errors = [r for r in caplog.records if r.name == FRAMEWORK and r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert result.id in errors[0].getMessage() and "state=FAILED" in errors[0].getMessage()
    assert errors[0].exc_info is not None and "a message to find" in str(errors[0].exc_info[1])


def test_a_run_whose_outcome_is_refused_is_not_logged_as_successful(
    task_namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An operator fails the record while it runs: the worker's settlement is refused.

    Django's line for the finished task goes out once the settlement is written: the
    refused run is not logged ``state=SUCCESSFUL``, the worker's ``outcome=lost`` is.
    """
    import threading
    import uuid

    from django_ledger import operations
    from django_ledger.services.worker import WorkerOptions, build_worker
    from tests.support.tasks_helpers import wait_until

    key = f"release-{uuid.uuid4().hex}"
    ledger = get_ledger("default")
    caplog.set_level(logging.INFO, logger=FRAMEWORK)
    caplog.set_level(logging.INFO, logger="django_ledger")
    worker = build_worker(WorkerOptions(queues=["default"], concurrency=2, relay=False))
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        done = tasks.add.enqueue(1, 2)
        wait_until(lambda: tasks.add.get_result(done.id).status == "SUCCESSFUL")
        refused = tasks.wait_for_key.enqueue(key)
        wait_until(lambda: tasks.wait_for_key.get_result(refused.id).status == "RUNNING")
        snap = operations.snapshot(ledger, refused.id)
        assert snap is not None
        operations.mark_failed(ledger, refused.id, snap.version)
        ledger.redis.rpush(key, b"too late")
        wait_until(lambda: worker.counts.lost == 1)
    finally:
        worker.request_stop()
        runner.join(30)
    assert not runner.is_alive()
    lines = [r.getMessage() for r in caplog.records if r.name == FRAMEWORK]
    assert any(done.id in line and "state=SUCCESSFUL" in line for line in lines), lines
    assert not any(
        refused.id in line and "state=" in line and "RUNNING" not in line for line in lines
    ), lines
    assert any(
        "outcome=lost" in r.getMessage() and refused.id in r.getMessage() for r in caplog.records
    )
    record = ledger.resolve(refused.id)
    assert record is not None and record.state is State.FAILED


# -- options from the queue and from the payload ----------------------------------------


def test_queue_options_apply_to_tasks_that_set_none(namespace: str) -> None:
    overrides = {"MAX_ATTEMPTS": 2, "RETRY_ON": ["ValueError"], "BACKOFF_BASE": 0.001}
    with task_settings(namespace, default={**overrides, "BACKOFF_CAP": 0.001}):
        tasks.fail.enqueue("retried by the queue's RETRY_ON")
        assert [o.state for o in run_until_settled()] == [State.PENDING, State.FAILED]
        tasks.picky.enqueue("builtins.ValueError")  # its own retry_on wins: no retry
        assert [o.state for o in run_until_settled()] == [State.FAILED]


def test_payload_options_win_over_the_task(task_namespace: str) -> None:
    admit_raw(encode_task("tests.support.tasks_app.tasks.flaky", [5], {}, {"max_attempts": 2}))
    assert [o.state for o in run_until_settled()] == [State.PENDING, State.FAILED]


def test_a_payload_option_that_does_not_parse_is_refused(task_namespace: str) -> None:
    job = job_of(encode_task("tests.support.tasks_app.tasks.add", [1, 2], {}, {"max_attempts": 0}))
    with pytest.raises(ValueError, match="max_attempts"):
        TaskHandler("default").plan(job)
