"""Tasks through real ``manage.py ledger_worker`` processes, seen through Django's API.

Only the public API looks at the outcome: ``@task``, ``.enqueue``, ``.using``,
``.get_result``, and the signals (which the worker's receivers, in
``tests/support/tasks_app/apps.py``, write to Redis for the test to read).
"""

from __future__ import annotations

import json
import random
import uuid
from typing import Any

import pytest

from django_ledger import get_ledger
from django_ledger.core.records import ms_to_datetime
from django_ledger.tasks import LeaseExpired, ResultTooLarge, enqueue_once
from django_ledger.tasks.compat import TaskResultDoesNotExist, TaskResultStatus
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import tasks
from tests.support.tasks_app.apps import signals_key
from tests.support.tasks_helpers import WorkerProcess, run_burst, wait_until

pytest_plugins = ["tests.support.tasks_fixtures"]


def finished(task: Any, result_id: str, timeout: float = 60) -> Any:
    """Wait for the task to finish (a bounded poll of get_result) and return its result."""
    wait_until(lambda: task.get_result(result_id).is_finished, timeout=timeout)
    return task.get_result(result_id)


def signals_of(result_id: str) -> list[dict[str, Any]]:
    raw = get_ledger("default").redis.lrange(signals_key(), 0, -1)
    return [event for event in map(json.loads, raw) if event["id"] == result_id]


# -- with the module's worker (LEASE 3 s, concurrency 4) --------------------------------


def test_a_task_is_ready_then_running_then_successful(live_worker: WorkerProcess) -> None:
    key = f"release-{uuid.uuid4().hex}"
    result = tasks.wait_for_key.enqueue(key)
    assert result.status == TaskResultStatus.READY
    wait_until(lambda: tasks.wait_for_key.get_result(result.id).status == "RUNNING")
    running = tasks.wait_for_key.get_result(result.id)
    assert running.worker_ids == ["live-1"] and running.attempts == 1
    assert running.started_at is not None and running.finished_at is None
    assert not running.is_finished
    get_ledger("default").redis.rpush(key, b"released")
    done = finished(tasks.wait_for_key, result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == "released"
    assert done.enqueued_at <= done.started_at <= done.finished_at
    assert done.worker_ids == ["live-1"] and done.errors == []
    sender = "django_ledger.tasks.backend.LedgerBackend"
    # task_finished goes out once the settlement is written, so just after the result reads
    # SUCCESSFUL: wait for its receiver's line.
    wait_until(lambda: len(signals_of(result.id)) >= 2)
    assert [(e["signal"], e["status"], e["sender"]) for e in signals_of(result.id)] == [
        ("task_started", "RUNNING", sender),
        ("task_finished", "SUCCESSFUL", sender),
    ]


def test_a_coroutine_task_runs_on_the_workers_loop(live_worker: WorkerProcess) -> None:
    result = tasks.async_add.enqueue(20, 22)
    assert finished(tasks.async_add, result.id).return_value == 42


def test_retries_keep_every_error(live_worker: WorkerProcess) -> None:
    flaky = tasks.flaky.enqueue(2)
    hopeless = tasks.always_fails.enqueue()
    picky = tasks.picky.enqueue("builtins.ValueError")
    done = finished(tasks.flaky, flaky.id)
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == 3
    assert [e.traceback.splitlines()[-1] for e in done.errors] == [
        "ConnectionError: attempt 1 failed",
        "ConnectionError: attempt 2 failed",
    ]
    failed = finished(tasks.always_fails, hopeless.id)
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 3
    assert [e.exception_class for e in failed.errors] == [ConnectionError] * 3
    refused = finished(tasks.picky, picky.id)
    assert refused.attempts == 1 and refused.errors[0].exception_class is ValueError
    wait_until(lambda: len(signals_of(hopeless.id)) >= 6)  # the last task_finished too
    events = [(e["signal"], e["status"]) for e in signals_of(hopeless.id)]
    assert events == [
        ("task_started", "RUNNING"),
        ("task_finished", "READY"),
        ("task_started", "RUNNING"),
        ("task_finished", "READY"),
        ("task_started", "RUNNING"),
        ("task_finished", "FAILED"),
    ]


def test_run_after_is_honoured_by_the_server_clock(live_worker: WorkerProcess) -> None:
    ledger = get_ledger("default")
    due = ledger.server_time_ms() + 2_000
    result = tasks.add.using(run_after=ms_to_datetime(due)).enqueue(1, 2)
    seen = tasks.add.get_result(result.id)
    if ledger.server_time_ms() < due:  # read before it was due: it must still wait
        assert seen.status == TaskResultStatus.READY and seen.started_at is None
    done = finished(tasks.add, result.id)
    assert done.return_value == 3
    assert done.started_at >= ms_to_datetime(due)


def test_a_time_out_is_an_error_of_its_attempt(live_worker: WorkerProcess) -> None:
    result = tasks.hangs.enqueue()
    failed = finished(tasks.hangs, result.id)
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 2
    assert [e.exception_class for e in failed.errors] == [TimeoutError, TimeoutError]


def test_a_result_too_large_fails_the_task_and_is_not_stored(live_worker: WorkerProcess) -> None:
    result = tasks.sized.enqueue(70_000)  # past the default MAX_RESULT_BYTES, 65,536
    failed = finished(tasks.sized, result.id)
    assert failed.status == TaskResultStatus.FAILED and failed.attempts == 1
    assert failed.errors[0].exception_class is ResultTooLarge
    stored = get_ledger("default").results([result.id])[0]
    assert stored is not None and len(stored) < 70_000


def test_a_payload_naming_no_task_is_failed_unrun(live_worker: WorkerProcess) -> None:
    from django_ledger.core.jobs import encode_task

    ledger = get_ledger("default")
    request_id = f"raw-{uuid.uuid4().hex}"
    ledger.admit(request_id, encode_task("tests.support.tasks_app.tasks.not_a_task", [], {}))
    wait_until(lambda: ledger.resolve(request_id).state.terminal)  # type: ignore[union-attr]
    assert ledger.resolve(request_id).state.value == "FAILED"  # type: ignore[union-attr]
    assert "a worker called a function that is not a task" not in live_worker.output()
    with pytest.raises(TaskResultDoesNotExist, match="names no task of this project"):
        tasks.add.get_result(request_id)  # a record, but not a task Django could show


def test_an_idempotent_enqueue_after_the_run_answers_the_result(live_worker: WorkerProcess) -> None:
    request_id = f"order-{uuid.uuid4().hex}"
    first = enqueue_once(tasks.add, request_id, 2, 3)
    finished(tasks.add, first.id)
    again = enqueue_once(tasks.add, request_id, 2, 3)
    assert again.status == TaskResultStatus.SUCCESSFUL and again.return_value == 5


# -- with workers of their own ------------------------------------------------------------


@pytest.fixture
def server(request: pytest.FixtureRequest) -> RedisServer:
    from tests.support.redis_plugin import session_server

    return session_server(request.config)


def test_due_tasks_are_claimed_in_priority_order(server: RedisServer, task_namespace: str) -> None:
    """200 tasks of mixed priorities, all due: higher first, FIFO within a priority."""
    rng = random.Random(2024)
    priorities = [rng.choice([-100, -5, 0, 0, 3, 42, 100]) for _ in range(200)]
    results = [
        tasks.claim_order.using(priority=priority).enqueue(index)
        for index, priority in enumerate(priorities)
    ]
    run_burst(server.url, task_namespace, "default", "--concurrency", "1")
    fences = {}
    for result in results:
        done = tasks.claim_order.get_result(result.id)
        assert done.status == TaskResultStatus.SUCCESSFUL
        fences[done.return_value["index"]] = done.return_value["fence"]
    claimed = sorted(fences, key=fences.__getitem__)
    assert claimed == sorted(range(200), key=lambda i: (-priorities[i], i))


def test_a_task_whose_worker_died_runs_again_on_another(
    server: RedisServer, task_namespace: str
) -> None:
    key = f"release-{uuid.uuid4().hex}"
    result = tasks.wait_for_key.enqueue(key)
    doomed = WorkerProcess(server.url, task_namespace, "default", "--worker-id", "doomed")
    try:
        wait_until(lambda: tasks.wait_for_key.get_result(result.id).status == "RUNNING")
    finally:
        doomed.process.kill()
        doomed.wait()
    get_ledger("default").redis.rpush(key, b"second time")
    survivor = WorkerProcess(server.url, task_namespace, "default", "--worker-id", "survivor")
    try:
        done = finished(tasks.wait_for_key, result.id)
    finally:
        assert survivor.stop() == 0, survivor.output()
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == "second time"
    assert done.attempts == 2 and done.worker_ids[1] == "survivor"
    assert [e.exception_class for e in done.errors] == [LeaseExpired]
