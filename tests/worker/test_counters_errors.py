"""The last error per task: kept by real worker processes, shown on the Tasks page."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from django_ledger import Ledger, get_ledger
from django_ledger.core.counters import Counters
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_burst
from tests.support.worker_process import WorkerProcess

pytest_plugins = ["tests.support.tasks_fixtures"]
pytestmark = pytest.mark.django_db

TASKS = "/admin/django_ledger/queue/tasks/"
FAIL = "tests.support.tasks_app.tasks.async_fail"


def test_the_tasks_page_shows_each_tasks_last_error(
    redis_server: RedisServer, task_namespace: str, admin_client: Client
) -> None:
    for n in range(3):
        tasks.async_fail.enqueue(f"card {n} declined\nsecond line, not shown")
    client = get_ledger("default").redis
    run_burst(redis_server.url, task_namespace, "default")

    counters = Counters(client, task_namespace)
    last = counters.read("default").errors[FAIL]
    assert last.error_class == "builtins.ValueError"
    assert re.fullmatch(r"card \d declined", last.line)
    # One field per task name, overwritten: the hash does not grow with the failures.
    assert client.hlen(counters.prefix("default") + ":e") == 1

    text = admin_client.get(TASKS, {"window": "hour"}).content.decode()
    row = re.search(rf'<tr data-task="{FAIL}">(.*?)</tr>', text, re.S)
    assert row, text
    assert "<code>builtins.ValueError</code>: card " in row.group(1)
    assert "declined" in row.group(1) and "second line" not in row.group(1)


def test_a_raw_handlers_last_error_is_its_class(
    redis_server: RedisServer, redis_client: Any, namespace: str, tmp_path: Path
) -> None:
    Ledger(redis_client, namespace, "failing").admit("bad", "work")
    worker = WorkerProcess(redis_server.url, namespace, ["failing", "--burst"], tmp_path / "w")
    try:
        assert worker.wait() == 0, worker.output()
    finally:
        worker.stop()
    raw = Counters(redis_client, namespace).read("failing").errors["fail"]
    assert raw.error_class == "builtins.RuntimeError" and raw.line == ""


def test_an_error_older_than_the_window_is_not_shown(
    task_namespace: str, admin_client: Client, settings: Any
) -> None:
    client = get_ledger("default").redis
    counters = Counters(client, task_namespace)
    two_hours_ago = counters.read("default").now_ms - 2 * 3600 * 1000
    error = json.dumps(["app.Boom", "old news", two_hours_ago])
    counters.add("default", {"f:app.t": 1}, now_ms=two_hours_ago, errors={"app.t": error})
    assert counters.read("default", "day").errors_since()["app.t"].line == "old news"
    assert counters.read("default", "hour").errors_since() == {}
    day = admin_client.get(TASKS, {"window": "day"}).content.decode()
    assert "old news" in day
    assert "old news" not in admin_client.get(TASKS, {"window": "hour"}).content.decode()
