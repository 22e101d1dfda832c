"""A ``ledger_worker`` drops other versions' function libraries at start, and keeps working."""

from __future__ import annotations

import signal
from pathlib import Path

import redis
from redis.cluster import RedisCluster

from django_ledger import Ledger
from django_ledger.core.library import library
from tests.support.ledger_helpers import servers
from tests.support.library_versions import libraries, other_version
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess, wait_until


def test_a_worker_drops_an_old_version_at_start_and_runs_its_tasks(
    redis_server: RedisServer,
    redis_client: redis.Redis | RedisCluster,
    namespace: str,
    tmp_path: Path,
) -> None:
    other, source = other_version()  # as a deploy leaves the version before it
    for server in servers(redis_client):
        server.function_load(source, replace=True)
    raw = Ledger(redis_client, namespace, "raw")
    for n in range(5):
        raw.admit(f"t-{n}", "work")
    worker = WorkerProcess(redis_server.url, namespace, ["raw"], tmp_path / "w.log")
    try:
        wait_until(
            lambda: not any(other in libraries(server) for server in servers(redis_client)),
            what="the old version's library dropped",
        )
        wait_until(lambda: raw.stats().completed == 5, what="every task run")
        wait_until(lambda: f"old libraries: dropped {other}" in worker.output(), what="the log")
        assert any(library().name in libraries(server) for server in servers(redis_client))
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()
    finally:
        worker.stop()
