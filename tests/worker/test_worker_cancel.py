"""Cancelling a running task through real ``ledger_worker`` processes.

The worker hears the cancel within a second (a blocking read of the queue's cancels
stream while it runs tasks, nothing while idle): a sync task sees ``context.cancelled``
and stops, a coroutine is cancelled at its next ``await``, and with ``--processes
--cancel-grace`` a task that never checks ends with its process, which is replaced.
Whatever the cancelled run settles afterwards is refused. Times are compared on the
Redis server's clock: the cancel's (its record's ``updated_at``) and the one the task
notes when it sees the cancel (``tests.support.tasks_app.cancel_tasks``).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.management import CommandError, call_command

from django_ledger import get_ledger
from django_ledger.core.records import State
from django_ledger.tasks import cancel
from django_ledger.tasks.compat import TaskResultStatus
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import cancel_tasks, tasks
from tests.support.tasks_helpers import task_settings
from tests.support.worker_process import wait_until
from tests.support.worker_variants import VariantWorker

SETTINGS = "tests.support.tasks_app.settings"
#: What a cancel promises: the running task hears of it within this many ms.
PROMISE_MS = 1000
PATIENCE = 20.0

pytestmark = pytest.mark.django_db


@pytest.fixture
def server(request: pytest.FixtureRequest) -> RedisServer:
    from tests.support.redis_plugin import session_server

    return session_server(request.config)


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    with server.client() as connection:
        yield connection


@pytest.fixture
def start(server: RedisServer, namespace: str, tmp_path: Path) -> Iterator[Any]:
    started: list[VariantWorker] = []

    def run(*args: str) -> VariantWorker:
        log = tmp_path / f"worker-{len(started)}.log"
        worker = VariantWorker(server.url, namespace, list(args), log, settings=SETTINGS)
        started.append(worker)
        return worker

    with task_settings(namespace):
        yield run
    for worker in started:
        worker.stop()


def cancelled_at(request_id: str) -> int:
    """When the cancel ended the record (ms, the server's clock)."""
    record = get_ledger("default").resolve(request_id)
    assert record is not None and record.state is State.FAILED
    return record.updated_at


def xreads(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_xread", {}).get("calls", 0))


def bzpopmins(client: redis.Redis) -> int:
    return int(client.info("commandstats").get("cmdstat_bzpopmin", {}).get("calls", 0))


@pytest.mark.standalone_only(reason="reads INFO commandstats and TIME of one node")
def test_a_running_task_hears_its_cancel_within_a_second_and_its_settlement_is_refused(
    start: Any, client: redis.Redis
) -> None:
    key = uuid.uuid4().hex
    worker = start("default", "--concurrency", "2", "--worker-id", "w-cancel")
    # Idle, the worker reads no cancels: its blocking waits on the wake key go on alone.
    wait_until(lambda: bzpopmins(client) > 0, PATIENCE, "the worker blocks, idle")
    before, blocks = xreads(client), bzpopmins(client)
    wait_until(lambda: bzpopmins(client) >= blocks + 2, PATIENCE, "two idle blocks")
    assert xreads(client) == before

    sync = cancel_tasks.checks_for_cancel.enqueue(f"{key}:sync")
    coro = cancel_tasks.awaits_its_cancel.enqueue(f"{key}:async")
    for name in ("sync", "async"):
        wait_until(lambda n=name: client.llen(f"{key}:{n}:started"), PATIENCE, f"{name} started")
    outcomes = [cancel(result.id, by="ops", reason="wrong input") for result in (sync, coro)]
    assert [(o.status, o.was) for o in outcomes] == [("cancelled", "CLAIMED")] * 2

    for name, result in (("sync", sync), ("async", coro)):
        saw = int(wait_until(lambda n=name: client.get(f"{key}:{n}:saw"), PATIENCE, name))
        assert 0 <= saw - cancelled_at(result.id) < PROMISE_MS, name
    # The coroutine ended at its await: the line after it never ran.
    assert client.get(f"{key}:async:after") is None
    # Each run's settlement was sent and refused: the record is as the cancel left it.
    for task, result in (
        (cancel_tasks.checks_for_cancel, sync),
        (cancel_tasks.awaits_its_cancel, coro),
    ):
        wait_until(
            lambda r=result: (
                "outcome=lost queue=default task=" in worker.output()
                and f"id={r.id} " in worker.output()
            ),
            PATIENCE,
            "the refused settlement",
        )
        got = task.get_result(result.id)
        assert got.status == TaskResultStatus.FAILED
        assert [e.exception_class_path for e in got.errors] == ["django_ledger.tasks.Cancelled"]
        assert "cancelled by ops at " in got.errors[0].traceback
    assert "reason=django_ledger.tasks.exceptions.Cancelled" in worker.output()  # sync: raised
    assert "reason=cancelled" in worker.output()  # the coroutine, given up by its worker
    assert xreads(client) > before  # it listened while they ran
    # The worker serves on.
    added = tasks.add.enqueue(2, 3)
    wait_until(lambda: tasks.add.get_result(added.id).is_finished, PATIENCE, "served on")
    assert tasks.add.get_result(added.id).return_value == 5


@pytest.mark.standalone_only(reason="reads TIME of one node")
def test_processes_with_a_cancel_grace_end_a_task_that_never_checks(
    start: Any, client: redis.Redis
) -> None:
    key = uuid.uuid4().hex
    stuck = cancel_tasks.never_checks.enqueue(key)
    held = tasks.add.enqueue(2, 3)  # claimed ahead (prefetched) by the same child
    worker = start("default", "--processes", "1", "--cancel-grace", "0.5")
    wait_until(lambda: client.llen(f"{key}:started"), PATIENCE, "the stuck task started")
    first_pid = int(client.lindex(f"{key}:started", 0))
    assert cancel(stuck.id, by="ops").cancelled
    wait_until(lambda: "ended (3); starting another" in worker.output(), PATIENCE, "replaced")
    assert f"worker process {first_pid} ended (3)" in worker.output()
    # The claim the child held unstarted went back, attempt unspent, and the new child ran it.
    wait_until(lambda: tasks.add.get_result(held.id).is_finished, PATIENCE, "the held task")
    done = tasks.add.get_result(held.id)
    assert (done.status, done.return_value, done.attempts) == (
        TaskResultStatus.SUCCESSFUL,
        5,
        1,
    )
    assert str(first_pid) not in done.worker_ids[0].split(":")[1:2]
    # The stuck task never ran on: its process ended; it stays as the cancel left it.
    assert client.get(f"{key}:after") is None
    assert client.llen(f"{key}:started") == 1
    result = cancel_tasks.never_checks.get_result(stuck.id)
    assert result.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in result.errors] == ["django_ledger.tasks.Cancelled"]
    assert "still runs 0.5 s after its cancel" in worker.output()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cancel-grace", "1"], "--cancel-grace needs --processes"),
        (["--processes", "1", "--cancel-grace", "-1"], "must be 0 or more seconds, got -1"),
        (["nope", "--processes", "2"], "unknown queue(s) 'nope'"),
    ],
)
def test_a_cancel_grace_that_cannot_work_is_refused_before_anything_starts(
    args: list[str], message: str
) -> None:
    with pytest.raises(CommandError, match=re.escape(message)):
        call_command("ledger_worker", *args, verbosity=0)
