"""A run ending with a ``BaseException`` that is not an ``Exception`` ends its attempt only.

``KeyboardInterrupt``, ``GeneratorExit``, ``asyncio.CancelledError``, ``SystemExit`` or a
project's own ``BaseException``, raised by a Django task (sync or coroutine) or a raw
``HANDLER``: each attempt ends FAILED with its error recorded, and the worker goes on
serving on the same threads and event loop, in the pool (``--concurrency 2``) and on the
main loop (``--concurrency 1``). The worker's own time-out interrupt still ends a run, and
a real SIGINT still stops the worker cleanly.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from django_ledger import get_ledger
from django_ledger.core.records import State
from django_ledger.tasks.compat import TaskResultStatus
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import escapes, tasks
from tests.support.tasks_app.escape_settings import ESCAPE_QUEUES
from tests.support.tasks_helpers import task_settings, wait_until
from tests.support.worker_variants import VariantWorker

#: Long enough for a slow box; a wedged record fails the test at this bound, not a hang.
PATIENCE = 20.0

#: Each task, and the error its attempt must record.
TASKS: list[tuple[Any, str]] = [
    (escapes.interrupts, "builtins.KeyboardInterrupt"),
    (escapes.generator_exits, "builtins.GeneratorExit"),
    (escapes.escapes, "tests.support.tasks_app.escapes.Escape"),
    (escapes.async_interrupts, "builtins.KeyboardInterrupt"),
    (escapes.async_cancels, "asyncio.exceptions.CancelledError"),
    (escapes.async_escapes, "tests.support.tasks_app.escapes.Escape"),
    (escapes.async_exits, "builtins.SystemExit"),
]
#: Raw records: queue, payload (what the handler raises), the reason its log line gives.
RAW = [
    ("raw_escapes", "exit", "builtins.SystemExit"),
    ("raw_escapes", "interrupt", "builtins.KeyboardInterrupt"),
    ("raw_escapes", "escape", "tests.support.tasks_app.escapes.Escape"),
    ("raw_escapes_async", "exit", "builtins.SystemExit"),
    ("raw_escapes_async", "interrupt", "builtins.KeyboardInterrupt"),
    ("raw_escapes_async", "cancel", "asyncio.exceptions.CancelledError"),
]


@pytest.fixture
def server(request: pytest.FixtureRequest) -> RedisServer:
    from tests.support.redis_plugin import session_server

    return session_server(request.config)


def finished(task: Any, result_id: str) -> Any:
    wait_until(lambda: task.get_result(result_id).is_finished, timeout=PATIENCE)
    return task.get_result(result_id)


def state_of(queue: str, request_id: str) -> State | None:
    record = get_ledger(queue).resolve(request_id)
    return None if record is None else record.state


@pytest.mark.parametrize("concurrency", ["1", "2"])
def test_a_base_exception_ends_its_attempt_and_the_worker_serves_on(
    server: RedisServer, namespace: str, tmp_path: Path, concurrency: str
) -> None:
    with task_settings(namespace, **ESCAPE_QUEUES):
        results = [(task, task.enqueue(), path) for task, path in TASKS]
        for queue, what, _ in RAW:
            assert get_ledger(queue).admit(f"{queue}-{what}", what).accepted
        worker = VariantWorker(
            server.url,
            namespace,
            ["default", *ESCAPE_QUEUES, "--concurrency", concurrency, "--worker-id", "w"],
            tmp_path / "worker.log",
            settings="tests.support.tasks_app.escape_settings",
        )
        try:
            for task, result, path in results:
                failed = finished(task, result.id)
                assert failed.status == TaskResultStatus.FAILED, (path, worker.output())
                assert failed.attempts == 1  # not an Exception: not retried
                assert [e.exception_class_path for e in failed.errors] == [path]
                assert failed.errors[0].traceback.startswith("Traceback")
            for queue, what, reason in RAW:
                request_id = f"{queue}-{what}"
                wait_until(lambda q=queue, r=request_id: state_of(q, r) is State.FAILED, PATIENCE)
                assert f"id={queue}-{what} attempt=1" in worker.output()
                assert f"reason={reason}" in worker.output()
            # The same threads and event loop go on: sync and coroutine tasks complete ...
            added = [tasks.add.enqueue(2, 3) for _ in range(4)]
            awaited = [tasks.async_add.enqueue(2, 3) for _ in range(4)]
            for result in added:
                assert finished(tasks.add, result.id).return_value == 5
            for result in awaited:
                assert finished(tasks.async_add, result.id).return_value == 5
            # ... and the worker's own time-out still interrupts a run.
            spun = finished(escapes.spins, escapes.spins.enqueue().id)
            assert [e.exception_class_path for e in spun.errors] == ["builtins.TimeoutError"]
            worker.signal(signal.SIGINT)  # a real signal still stops the worker cleanly
            assert worker.wait(PATIENCE) == 0, worker.output()
        finally:
            worker.stop()
    output = worker.output()
    assert "stopped: " in output and "Traceback" in output  # the raw errors' tracebacks
