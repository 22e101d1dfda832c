"""Recycling worker processes: ``--max-tasks-per-child`` and ``--max-memory-per-child``.

A worker that reaches either starts no more tasks, gives back the claims it holds
unstarted, lets the running ones settle and exits 75; ``--processes`` starts a fresh
process in its place every time, ``--burst`` or not. Real worker processes on the suite's
redis-server; what the handlers ran is read back from Redis
(``tests.support.worker_handlers``: each started task notes its worker's id).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from django_ledger import Ledger
from django_ledger.core.worker.config import EXIT_RECYCLE
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess
from tests.support.worker_starts import starting


@pytest.fixture
def start(
    redis_server: RedisServer, namespace: str, tmp_path: Path
) -> Iterator[Callable[..., WorkerProcess]]:
    yield from starting(
        tmp_path, lambda args, log: WorkerProcess(redis_server.url, namespace, args, log)
    )


def ran(client: redis.Redis, namespace: str) -> list[tuple[str, str, str]]:
    """(request id, attempt, worker id) of every task started, in order."""
    lines = [line.decode().split() for line in client.lrange(f"{namespace}:started", 0, -1)]
    return [(request_id, attempt, worker) for request_id, _, attempt, worker in lines]


def test_a_thousand_tasks_through_processes_recycled_every_hundred(
    start: type[WorkerProcess], redis_client: redis.Redis, namespace: str
) -> None:
    raw = Ledger(redis_client, namespace, "raw")
    ids = [f"job-{n:04d}" for n in range(1000)]
    raw.admit_many([(request_id, "x") for request_id in ids])
    worker = start(
        "raw", "--processes", "1", "--max-tasks-per-child", "100", "--prefetch", "4", "--burst"
    )
    assert worker.wait(300) == 0, worker.output()
    started = ran(redis_client, namespace)
    # Every task once, on its first attempt: the claims a recycling process held
    # unstarted went back without spending one.
    assert sorted(request_id for request_id, _, _ in started) == ids
    assert {attempt for _, attempt, _ in started} == {"1"}
    # Ten processes (a worker id names its process), a hundred tasks each.
    per_worker = Counter(worker_id for _, _, worker_id in started)
    assert sorted(per_worker.values()) == [100] * 10
    assert len({worker_id.split(":")[1] for worker_id in per_worker}) == 10  # ten pids
    stats = raw.stats()
    assert (stats.completed, stats.pending, stats.claimed) == (1000, 0, 0)
    assert worker.output().count("recycled; starting another") >= 9


def test_a_recycling_worker_gives_back_its_held_claims_and_exits_75(
    start: type[WorkerProcess], redis_client: redis.Redis, namespace: str
) -> None:
    raw = Ledger(redis_client, namespace, "raw")
    raw.admit_many([(f"r{n:02d}", "x") for n in range(20)])
    worker = start("raw", "--max-tasks-per-child", "3", "--concurrency", "1", "--prefetch", "5")
    assert worker.wait(60) == EXIT_RECYCLE, worker.output()
    assert [request_id for request_id, _, _ in ran(redis_client, namespace)] == [
        "r00",
        "r01",
        "r02",
    ]
    stats = raw.stats()
    # Nothing left claimed: the five held ready went back, due at once.
    assert (stats.completed, stats.pending_due, stats.claimed) == (3, 17, 0)
    assert "recycling (3 tasks started)" in worker.output()
    # Each of the seventeen is still on its first attempt.
    claims = raw.claim_many("check", 20)
    assert sorted(claim.request_id for claim in claims) == [f"r{n:02d}" for n in range(3, 20)]
    assert {claim.attempt for claim in claims} == {1}


def test_a_worker_past_its_memory_limit_recycles(
    start: type[WorkerProcess], redis_client: redis.Redis, namespace: str
) -> None:
    # Each task keeps 32 MiB: a fresh worker holds well under 256 MiB, so it recycles
    # after a few tasks, long before the twenty are done.
    hoarding = Ledger(redis_client, namespace, "hoarding")
    hoarding.admit_many([(f"h{n:02d}", "x") for n in range(20)])
    worker = start("hoarding", "--max-memory-per-child", "256", "--concurrency", "1")
    assert worker.wait(60) == EXIT_RECYCLE, worker.output()
    count = len(ran(redis_client, namespace))
    assert 1 <= count < 20
    stats = hoarding.stats()
    assert (stats.completed, stats.pending_due, stats.claimed) == (count, 20 - count, 0)
    assert "MiB resident, above 256" in worker.output()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-memory-per-child", "1"], "--max-memory-per-child 1 MiB leaves no room"),
        (["--max-memory-per-child", "0"], "max_memory_per_child must be more than 0"),
        (["--max-tasks-per-child", "0"], "max_tasks_per_child must be at least 1"),
    ],
)
def test_a_limit_that_cannot_work_is_refused_at_start(
    start: type[WorkerProcess], args: list[str], message: str
) -> None:
    worker = start("raw", *args)
    assert worker.wait(60) != 0
    assert message in worker.output()
