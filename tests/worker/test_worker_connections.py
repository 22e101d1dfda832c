"""The worker's connections, seen from the server (``CLIENT LIST``).

- The worker's own scope (its main loop) gives its connection back when ``run`` returns.
- A worker whose connections the server kills (a ``from_url`` client, which does not
  retry) loses no task and logs no failed call.
- A worker serves within the smallest ``BlockingConnectionPool`` the docs name (2): the
  loop holds one connection, an idle waker one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator

import pytest
import redis

from django_ledger import Ledger, State
from django_ledger.core.worker import Job
from django_ledger.core.worker.handler import CallableHandler
from django_ledger.core.worker.runtime import Worker, WorkerConfig
from tests.core.test_lane_rules import named
from tests.support.redis_server import RedisServer
from tests.support.worker_process import wait_until


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def run_worker(worker: Worker) -> threading.Thread:
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    return runner


def stop_worker(worker: Worker, runner: threading.Thread) -> None:
    worker.request_stop()
    runner.join(30)
    assert not runner.is_alive()


@pytest.mark.standalone_only("each test starts a redis-server of its own")
def test_the_worker_gives_its_loops_connection_back_when_it_returns(
    own_redis: RedisServer,
) -> None:
    client = redis.Redis.from_url(own_redis.url, client_name="worker-loop")
    ledger = Ledger(client, "n", "loop")
    for i in range(30):
        assert ledger.admit(f"id-{i}", "p").accepted
    worker = Worker(
        {"loop": ledger},
        {"loop": CallableHandler(lambda job: "done", max_attempts=5)},
        {"loop": 30.0},
        WorkerConfig(worker_id="w-loop", concurrency=1, burst=True),
    )
    assert worker.run() == 0
    assert ledger.stats().completed == 30
    # The loop's scope ended with run(): no connection is still checked out of the pool.
    client.connection_pool.disconnect(inuse_connections=False)
    assert named(own_redis, "worker-loop") == []
    client.close()


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.standalone_only("each test starts a redis-server of its own")
def test_a_worker_on_a_from_url_client_loses_nothing_when_the_server_kills_its_connections(
    own_redis: RedisServer,
) -> None:
    client = redis.Redis.from_url(own_redis.url, client_name="worker-killed")
    ledger = Ledger(client, "n", "killed")
    total = 120
    ledger.admit_many([(f"id-{i}", str(i)) for i in range(total)])
    kills: list[int] = []

    def handle(job: Job) -> str:
        # At concurrency 1 a job runs on the main loop's thread: each kill falls between
        # its script calls (a kill during a call fails on redis-py's path too, unretried).
        if int(job.claim.payload) % 10 == 9:
            with own_redis.client() as admin:
                kills.append(
                    sum(
                        admin.client_kill_filter(_id=e["id"])
                        for e in named(own_redis, "worker-killed")
                    )
                )
        return "done"

    captured = Captured()
    logger = logging.getLogger("django_ledger")
    logger.addHandler(captured)
    worker = Worker(
        {"killed": ledger},
        {"killed": CallableHandler(handle, max_attempts=5)},
        {"killed": 30.0},
        WorkerConfig(worker_id="w-killed", concurrency=1, repair=False),
    )
    runner = run_worker(worker)
    watcher = Ledger(own_redis.client(), "n", "killed")  # its own connection: never killed
    try:
        wait_until(lambda: watcher.stats().completed == total, timeout=60, what="every task")
    finally:
        stop_worker(worker, runner)
        logger.removeHandler(captured)
    assert sum(kills) >= 12  # the kills reached the worker's connections
    records = watcher.resolve_many([f"id-{i}" for i in range(total)])
    assert {(r.state, r.attempts) for r in records if r is not None} == {(State.COMPLETED, 1)}
    assert (worker.counts.processed, worker.counts.lost) == (total, 0)
    failed = [m for m in captured.messages if "unavailable" in m.lower() or "failed" in m]
    assert failed == [], failed[:3]
    watcher.redis.close()
    client.close()


@pytest.mark.standalone_only("each test starts a redis-server of its own")
def test_a_worker_serves_within_the_smallest_blocking_pool_the_docs_name(
    own_redis: RedisServer,
) -> None:
    """docs/django.md: the loop holds one connection, an idle waker one: a pool of 2 serves."""
    pool = redis.BlockingConnectionPool.from_url(
        own_redis.url, max_connections=2, timeout=5, client_name="worker-two"
    )
    client = redis.Redis(connection_pool=pool)
    ledger = Ledger(client, "n", "two")
    captured = Captured()
    logger = logging.getLogger("django_ledger")
    logger.addHandler(captured)
    worker = Worker(
        {"two": ledger},
        {"two": CallableHandler(lambda job: "done", max_attempts=5)},
        {"two": 6.0},  # renewals beside the loop's connection and the waker's
        WorkerConfig(worker_id="w-two", concurrency=2, repair_interval=0.2),
    )
    runner = run_worker(worker)
    watcher = Ledger(own_redis.client(), "n", "two")
    try:
        for round_ in range(3):
            watcher.admit_many([(f"{round_}-{i}", "p") for i in range(20)])
            wait_until(lambda r=round_: watcher.stats().completed == 20 * (r + 1), timeout=30)
            peak = len(named(own_redis, "worker-two"))
            assert peak <= 2
            threading.Event().wait(3)  # idle: the waker blocks on the wake key meanwhile
    finally:
        stop_worker(worker, runner)
        logger.removeHandler(captured)
    # Nothing waited on the pool in vain. (A renewal answered LOST is a lease that lapsed
    # on a loaded machine, repair's business: not the pool's.)
    assert [m for m in captured.messages if "LOST" not in m] == []
    assert watcher.stats().completed == 60
    watcher.redis.close()
    client.close()
