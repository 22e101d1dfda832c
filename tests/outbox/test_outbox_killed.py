"""A committer SIGKILLed after its commit, before its own delivery: the relay delivers.

In processes of their own (``tests/support/outbox_process.py``), on a SQLite file and on the
private PostgreSQL cluster: the process enqueues inside ``atomic()`` and commits, and an
on-commit callback registered before the enqueue kills it (SIGKILL) before the
committer's delivery runs. The row stands; ``ledger_relay --once`` admits it, once.
"""

from __future__ import annotations

import json
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest

from django_ledger.queues import queues
from tests.support.outbox_process import answer, run
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import run_claimed

pytest_plugins = ["tests.support.tasks_fixtures", "tests.support.postgres_server"]


def _sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    return {"DATABASE_PATH": str(tmp_path / "killed.sqlite3")}


def _postgres(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    import psycopg

    server = request.getfixturevalue("postgres_server")
    name = f"killed_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server.dsn(), autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return {"LEDGER_TEST_PG": json.dumps(server.database(name))}


@pytest.mark.parametrize("database", [_sqlite, _postgres], ids=["sqlite", "postgres"])
def test_a_task_committed_by_a_killed_process_is_delivered_once(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    task_namespace: str,
    tmp_path: Path,
    database: Any,
) -> None:
    env = database(request, tmp_path)
    where: dict[str, Any] = {
        "redis_url": redis_server.url,
        "namespace": task_namespace,
        "database": env,
    }
    answer(run("migrate", **where))
    id_file = tmp_path / "task-id"
    killed = run("killed", str(id_file), **where)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    task_id = id_file.read_text()
    ledger = queues.get("default").ledger
    assert ledger.stats().pending == 0  # committed, never admitted
    assert "delivered 1 task(s)" in answer(run("relay", **where))["stdout"]
    assert ledger.stats().pending == 1
    assert "delivered 0 task(s)" in answer(run("relay", **where))["stdout"]
    ran = run_claimed()
    assert ran is not None and ran[0].claim.request_id == task_id
    assert run_claimed() is None  # admitted once
    assert tasks.add.get_result(task_id).return_value == 42


def test_a_process_that_exits_right_after_its_commits_delivers_them(
    request: pytest.FixtureRequest, redis_server: RedisServer, task_namespace: str, tmp_path: Path
) -> None:
    # On PostgreSQL the courier thread delivers after the commits; the exit waits for it.
    where: dict[str, Any] = {
        "redis_url": redis_server.url,
        "namespace": task_namespace,
        "database": _postgres(request, tmp_path),
    }
    answer(run("migrate", **where))
    found = answer(run("exits", "50", **where))
    assert found["courier"] is True  # delivered in the background, not by the commits
    assert queues.get("default").ledger.stats().pending == 50
    assert "delivered 0 task(s)" in answer(run("relay", **where))["stdout"]  # none left
    claimed = set()
    while (ran := run_claimed()) is not None:
        claimed.add(ran[0].claim.request_id)
    assert claimed == set(found["ids"])
