"""A task whose worker is SIGKILLed mid-run: its lost attempt keeps its worker and times.

Through real ``manage.py ledger_worker`` processes (3 s leases), seen through Django's
API: ``get_result`` names the dead worker, ``started_at`` is the first attempt's start,
and the stored document holds the lost attempt's start and its lease's expiry. Repair
runs in the test, on the optimized or the reference path.
"""

from __future__ import annotations

import signal
import uuid

import pytest

from django_ledger import Ledger, get_ledger
from django_ledger.core.jobs import decode_result
from django_ledger.core.records import ms_to_datetime
from django_ledger.tasks import LeaseExpired
from tests.support.redis_server import RedisServer
from tests.support.tasks_app import tasks
from tests.support.tasks_helpers import WorkerProcess, wait_until

pytest_plugins = ["tests.support.tasks_fixtures"]


@pytest.mark.parametrize("optimized", [True, False], ids=["optimized", "reference"])
def test_a_sigkilled_attempt_keeps_its_worker_and_start(
    redis_server: RedisServer, task_namespace: str, optimized: bool
) -> None:
    key = f"release-{uuid.uuid4().hex}"
    result = tasks.wait_for_key.enqueue(key)
    tasks_ledger = get_ledger("default")
    ledger = Ledger(tasks_ledger.redis, task_namespace, "default", optimized=optimized)
    doomed = WorkerProcess(
        redis_server.url, task_namespace, "default", "--worker-id", "doomed", "--no-repair"
    )
    try:
        wait_until(lambda: tasks.wait_for_key.get_result(result.id).status == "RUNNING")
    finally:
        doomed.process.send_signal(signal.SIGKILL)
        doomed.wait()
    lost = ledger.resolve(result.id)  # as the dead worker left it
    assert lost is not None and lost.owner == "doomed" and lost.lease_until is not None
    wait_until(lambda: ledger.stats().expired_leases == 1)
    for _ in ledger.repair_cycle():
        pass
    waiting = tasks.wait_for_key.get_result(result.id)
    assert waiting.status == "READY" and waiting.worker_ids == ["doomed"]
    assert waiting.started_at == ms_to_datetime(lost.updated_at)

    ledger.redis.rpush(key, b"second time")
    survivor = WorkerProcess(
        redis_server.url, task_namespace, "default", "--worker-id", "survivor", "--no-repair"
    )
    try:
        wait_until(lambda: tasks.wait_for_key.get_result(result.id).is_finished, timeout=60)
    finally:
        assert survivor.stop() == 0, survivor.output()
    done = tasks.wait_for_key.get_result(result.id)
    assert done.return_value == "second time"
    assert done.worker_ids == ["doomed", "survivor"]
    assert [e.exception_class for e in done.errors] == [LeaseExpired]
    assert "worker 'doomed'" in done.errors[0].traceback
    # Django's started_at is the first attempt's start; last_attempted_at the last one's.
    assert done.started_at == ms_to_datetime(lost.updated_at)
    assert done.last_attempted_at is not None and done.last_attempted_at > done.started_at
    (raw,) = ledger.results([result.id])
    first = decode_result(raw).attempts[0]
    assert (first.worker_id, first.started_at, first.finished_at) == (
        "doomed",
        lost.updated_at,
        lost.lease_until,
    )
