"""``manage.py ledger_worker`` on a sharded queue: every shard drained, each task once.

Real worker processes, as in ``test_worker_process.py``; on the cluster run the three
shards live on three masters.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from django_ledger import State
from django_ledger.core.layout import shard_index
from django_ledger.core.sharded import ShardedLedger
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess, wait_until


@pytest.fixture
def sharded(redis_client: redis.Redis, namespace: str) -> ShardedLedger:
    return ShardedLedger(redis_client, namespace, "sharded", 3)


@pytest.fixture
def workers(
    redis_server: RedisServer, namespace: str, tmp_path: Path
) -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def start(
    started: list[WorkerProcess],
    redis_server: RedisServer,
    namespace: str,
    tmp_path: Path,
    *args: str,
) -> WorkerProcess:
    worker = WorkerProcess(
        redis_server.url, namespace, ["sharded", *args], tmp_path / f"worker-{len(started)}.log"
    )
    started.append(worker)
    return worker


def runs(client: redis.Redis, namespace: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in client.hgetall(f"{namespace}:runs").items()}


@pytest.mark.parametrize(
    "args", [("--concurrency", "8"), ("--concurrency", "1", "--prefetch", "0")]
)
def test_burst_drains_every_shard_once(
    args: tuple[str, ...],
    sharded: ShardedLedger,
    workers: list[WorkerProcess],
    redis_server: RedisServer,
    redis_client: redis.Redis,
    namespace: str,
    tmp_path: Path,
) -> None:
    ids = [f"job-{n:04d}" for n in range(300)]
    sharded.admit_many([(request_id, f"payload {request_id}") for request_id in ids])
    assert {shard_index(i, 3) for i in ids} == {0, 1, 2}
    worker = start(workers, redis_server, namespace, tmp_path, "--burst", *args)
    assert worker.wait(120) == 0, worker.output()
    assert runs(redis_client, namespace) == dict.fromkeys(ids, 1)
    stats = sharded.stats()
    assert (stats.completed, stats.pending, stats.claimed) == (300, 0, 0)
    for shard in sharded.shards:
        assert shard.stats().completed > 0
    assert sharded.results(["job-0042"]) == [b'{"echo": "payload job-0042"}']


def test_two_workers_share_a_sharded_queue_and_stop_cleanly(
    sharded: ShardedLedger,
    workers: list[WorkerProcess],
    redis_server: RedisServer,
    redis_client: redis.Redis,
    namespace: str,
    tmp_path: Path,
) -> None:
    first = start(workers, redis_server, namespace, tmp_path, "--concurrency", "4")
    second = start(workers, redis_server, namespace, tmp_path, "--concurrency", "4")
    # Both running (their signal handlers in place) before any work or any signal.
    wait_until(
        lambda: all(" started on sharded" in w.output() for w in (first, second)),
        timeout=60,
        what="both workers to start",
    )
    ids = [f"t{n}" for n in range(400)]
    sharded.admit_many([(request_id, "p") for request_id in ids])
    wait_until(lambda: sharded.stats().completed == 400, timeout=60, what="400 completions")
    for worker in (first, second):
        worker.signal(signal.SIGTERM)
    assert first.wait() == 0 and second.wait() == 0, first.output() + second.output()
    assert runs(redis_client, namespace) == dict.fromkeys(ids, 1)
    records = sharded.resolve_many(ids)
    assert {(r.state, r.attempts) for r in records if r} == {(State.COMPLETED, 1)}
    owners = {r.owner for r in records if r}
    assert len(owners) == 2  # both workers took part
