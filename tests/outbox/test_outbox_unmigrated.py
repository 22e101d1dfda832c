"""A project that has not run ``migrate django_ledger``: the outbox steps aside, loudly once.

In processes of their own on an empty SQLite file (``tests/support/outbox_process.py``): an
enqueue inside ``atomic()`` admits at once (as ``TRANSACTIONS: "immediate"``) with one
warning, ``get_result`` works, the deploy check says W066, and a worker keeps working
with one warning and no traceback.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.outbox_process import answer, run
from tests.support.redis_server import RedisServer
from tests.support.tasks_helpers import run_burst

pytest_plugins = ["tests.support.tasks_fixtures"]

MISSING = "has no table 'django_ledger_outbox' (run manage.py migrate django_ledger)"


def test_an_enqueue_in_atomic_admits_at_once_and_warns_once(
    redis_server: RedisServer, namespace: str, tmp_path: Path
) -> None:
    process = run(
        "unmigrated",
        redis_url=redis_server.url,
        namespace=namespace,
        database={"DATABASE_PATH": str(tmp_path / "empty.sqlite3")},
    )
    found = answer(process)
    assert found["pending_inside"] == 1  # admitted at once, inside the transaction
    assert found["status"] == "READY"
    assert found["unknown"] == "TaskResultDoesNotExist"
    assert found["checks"] == ["django_ledger.W066"]
    assert process.stderr.count(MISSING) == 1, process.stderr
    assert "Traceback" not in process.stderr


def test_a_worker_on_an_unmigrated_database_warns_once_and_works(
    redis_server: RedisServer, namespace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django_ledger.queues import queues
    from tests.support.tasks_app import tasks
    from tests.support.tasks_helpers import task_settings

    monkeypatch.setenv("DATABASE_PATH", str(tmp_path / "empty.sqlite3"))  # the worker's
    with task_settings(namespace):
        result = tasks.add.enqueue(2, 2)  # outside a transaction: admitted now
        output = run_burst(redis_server.url, namespace, "default")
        assert queues.get("default").ledger.stats().pending == 0
        assert tasks.add.get_result(result.id).return_value == 4
    assert output.count(MISSING) == 1, output
    assert "Traceback" not in output
