"""Progress and metadata through real ``ledger_worker`` processes, read through ``get_result``.

A task reports as often as it likes: the worker writes at most once per interval (and
the last value before the settlement), so 10,000 reports cost a handful of commands,
counted on a redis-server of the test's own with ``INFO commandstats``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from django.test import override_settings

from django_ledger import get_ledger
from django_ledger.tasks.compat import TaskResultStatus
from django_ledger.tasks.results import LedgerTaskResult
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import (
    WorkerProcess,
    ledger_settings_for,
    run_burst,
    wait_until,
)

pytest_plugins = ["tests.support.tasks_fixtures"]


@pytest.fixture
def own_redis(fresh_redis: RedisServer, namespace: str) -> Iterator[RedisServer]:
    """``LEDGER`` on a redis-server of the test's own: its command counts are the test's."""
    ledger = ledger_settings_for(namespace)
    ledger["CONNECTION"] = fresh_redis.url
    with override_settings(LEDGER=ledger):
        yield fresh_redis


@pytest.mark.standalone_only("its worker and INFO commandstats are a private server's")
def test_ten_thousand_reports_cost_a_handful_of_commands(
    own_redis: RedisServer, namespace: str
) -> None:
    result = tasks.report_progress.enqueue(10_000)
    run_burst(own_redis.url, namespace, "default", "--concurrency", "1")
    done = tasks.report_progress.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    # Every command Redis ran while the task reported 10,000 times (renewals, heartbeats
    # and progress writes of the whole worker): at most one beat's worth.
    assert done.return_value <= 5, f"{done.return_value} commands for 10,000 reports"
    assert isinstance(done, LedgerTaskResult)
    progress = done.progress
    assert progress is not None  # the last report, written before the settlement
    assert (progress.done, progress.total, progress.note) == (10_000, 10_000, "step 10000")
    assert progress.percent == 100
    assert done.metadata == {"steps": 10_000}


def test_progress_moves_while_the_task_runs_and_the_last_stays(
    task_namespace: str, redis_server: RedisServer
) -> None:
    key = f"steps-{uuid.uuid4().hex}"
    result = tasks.progress_then_wait.enqueue(key, 10)
    worker = WorkerProcess(
        redis_server.url, task_namespace, "--burst", "default", "--progress-interval", "0.1"
    )
    try:
        wait_until(lambda: tasks.progress_then_wait.get_result(result.id).progress is not None)
        seen = tasks.progress_then_wait.get_result(result.id)
        assert seen.status == TaskResultStatus.RUNNING
        assert (seen.progress.done, seen.progress.total, seen.progress.note) == (1, 10, "started")
        assert seen.metadata == {"phase": "waiting"}
        redis = get_ledger("default").redis
        redis.rpush(key, "4")
        wait_until(lambda: tasks.progress_then_wait.get_result(result.id).progress.done == 4)
        result.refresh()  # a result refreshed reads the progress too
        assert result.progress is not None and result.progress.note == "at 4"
        redis.rpush(key, "end")
        code = worker.wait()  # a burst: it ends once the task has
    finally:
        worker.stop()
    assert code == 0
    done = tasks.progress_then_wait.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL
    assert (done.progress.done, done.progress.note, done.progress.percent) == (10, "finished", 100)
    assert done.metadata == {"phase": "done"}
