"""A worker's prefetched claims that never started: not shown running, no attempt spent.

``ledger_worker --concurrency 4`` (prefetch 4) holds 8 claims while 4 jobs run. The 4
held ones are claimed, not started: their tasks show READY, and when the worker is
SIGKILLed, repair gives their attempts back (no ``LeaseExpired`` in their history),
while the 4 that started spend theirs.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from django_ledger import Ledger, State
from django_ledger.tasks.state import LEASE_EXPIRED_PATH, task_state
from tests.redis_server import RedisServer
from tests.worker_process import WorkerProcess, wait_until


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def _started(client: redis.Redis, namespace: str) -> set[str]:
    return {line.split()[0].decode() for line in client.lrange(f"{namespace}:started", 0, -1)}


def test_sigkill_with_prefetched_claims_spends_only_the_started_attempts(
    redis_server: RedisServer,
    redis_client: redis.Redis,
    namespace: str,
    tmp_path: Path,
    workers: list[WorkerProcess],
) -> None:
    blocking = Ledger(redis_client, namespace, "blocking")  # 2 s leases, jobs that wait
    ids = [f"slow-{n}" for n in range(8)]
    blocking.admit_many([(request_id, "work") for request_id in ids])
    worker = WorkerProcess(
        redis_server.url,
        namespace,
        ["blocking", "--concurrency", "4", "--no-repair"],
        tmp_path / "worker.log",
    )
    workers.append(worker)
    wait_until(lambda: len(_started(redis_client, namespace)) == 4, what="4 jobs to start")
    wait_until(lambda: blocking.stats().claimed == 8, what="8 claims in hand")
    ran = _started(redis_client, namespace)
    records = {r.request_id: r for r in blocking.resolve_many(ids) if r is not None}
    statuses = {i: task_state("blocking", records[i], None).status for i in ids}
    assert statuses == {i: "RUNNING" if i in ran else "READY" for i in ids}, worker.output()

    worker.signal(signal.SIGKILL)
    worker.wait()
    wait_until(lambda: blocking.stats().expired_leases == 8, what="the leases to expire")
    for _ in blocking.repair_cycle():
        pass
    after = {r.request_id: r for r in blocking.resolve_many(ids) if r is not None}
    assert {i: (after[i].state, after[i].attempts) for i in ids} == {
        i: (State.PENDING, 1 if i in ran else 0) for i in ids
    }
    for request_id in ids:
        errors = task_state("blocking", after[request_id], None).errors
        paths = [error["exception_class_path"] for error in errors]
        assert paths == ([LEASE_EXPIRED_PATH] if request_id in ran else [])
