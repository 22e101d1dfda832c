"""``ledger_worker`` delivers what the outbox holds: the relay is a room beside repair.

A committer SIGKILLed after its commit leaves its row (``tests/support/outbox_process.py``); a
worker started afterwards, with nothing else deployed, admits it from the room its
repairer's thread beats, and runs it once. ``--no-relay`` leaves the row to
``ledger_relay``. The rooms themselves (``core/worker/upkeep.py``) are tested on the
core ``Worker``, with no Django: beaten in the repairer's thread, also with repair off,
and closed there when the worker stops.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

import pytest
import redis

from django_ledger import Ledger
from django_ledger.core.worker.handler import CallableHandler
from django_ledger.core.worker.runtime import Worker, WorkerConfig
from django_ledger.queues import queues
from django_ledger.tasks.compat import TaskResultStatus
from tests.support.outbox_process import answer, run, start
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import wait_until

pytest_plugins = ["tests.support.tasks_fixtures"]


def _left_behind(
    redis_server: RedisServer, namespace: str, tmp_path: Path
) -> tuple[dict[str, Any], str]:
    where: dict[str, Any] = {
        "redis_url": redis_server.url,
        "namespace": namespace,
        "database": {"DATABASE_PATH": str(tmp_path / "worker.sqlite3")},
    }
    answer(run("migrate", **where))
    id_file = tmp_path / "task-id"
    killed = run("killed", str(id_file), **where)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    return where, id_file.read_text()


def _succeeded(task_id: str) -> bool:
    try:
        return tasks.add.get_result(task_id).status == TaskResultStatus.SUCCESSFUL
    except Exception:  # not admitted yet: this process's database has no such row
        return False


def test_a_worker_delivers_a_row_left_behind_and_runs_it_once(
    redis_server: RedisServer, task_namespace: str, tmp_path: Path
) -> None:
    where, task_id = _left_behind(redis_server, task_namespace, tmp_path)
    ledger = queues.get("default").ledger
    assert ledger.stats().pending == 0  # committed, never admitted
    worker = start("worker", **where)
    try:
        wait_until(lambda: _succeeded(task_id))
    finally:
        worker.send_signal(signal.SIGTERM)
        output, _ = worker.communicate(timeout=30)
    assert worker.returncode == 0, output
    assert tasks.add.get_result(task_id).return_value == 42
    assert "delivered 0 task(s)" in answer(run("relay", **where))["stdout"]  # row deleted


def test_no_relay_leaves_the_row_to_ledger_relay(
    redis_server: RedisServer, task_namespace: str, tmp_path: Path
) -> None:
    where, _ = _left_behind(redis_server, task_namespace, tmp_path)
    burst = run("worker", "--burst", "--no-relay", **where)
    assert burst.returncode == 0, burst.stdout + burst.stderr
    ledger = queues.get("default").ledger
    assert ledger.stats().pending == 0  # the worker did not deliver it
    assert "delivered 1 task(s)" in answer(run("relay", **where))["stdout"]
    assert ledger.stats().pending == 1


class _Room:
    """A room that says more waits twice, then rests; it notes the threads it ran on."""

    name = "counting"

    def __init__(self) -> None:
        self.beats = 0
        self.threads: set[str] = set()
        self.closed_on: str | None = None

    def beat(self) -> float:
        self.threads.add(threading.current_thread().name)
        self.beats += 1
        if self.beats == 4:
            raise RuntimeError("a failing beat is logged; the next one comes")
        return 0.0 if self.beats < 3 else 0.01

    def close(self) -> None:
        self.closed_on = threading.current_thread().name


@pytest.mark.parametrize("repair", [True, False], ids=["beside-repair", "repair-off"])
def test_rooms_are_beaten_in_the_repairers_thread_and_closed_there(
    redis_client: redis.Redis, namespace: str, repair: bool
) -> None:
    ledger = Ledger(redis_client, namespace, "rooms")
    room = _Room()
    worker = Worker(
        {"rooms": ledger},
        {"rooms": CallableHandler(lambda job: None, max_attempts=1)},
        {"rooms": 5.0},
        WorkerConfig(concurrency=1, repair=repair, repair_interval=0.01, rooms=(room,)),
    )
    runner = threading.Thread(target=worker.run)
    runner.start()
    try:
        wait_until(lambda: room.beats >= 6)
    finally:
        worker.request_stop()
        runner.join(30)
    assert not runner.is_alive()
    assert room.threads == {"ledger-repairer"}  # no thread of its own
    assert room.closed_on == "ledger-repairer"
