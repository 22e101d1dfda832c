"""Heartbeats of real ``ledger_worker`` processes, read back from Redis.

A worker beats every third of its shortest lease (the ``blocking`` queue's is 2 s) with
an expiry of its own; a clean stop removes the heartbeat, a killed worker's expires.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from django_ledger import Ledger
from django_ledger.core.worker import Heartbeats, WorkerInfo
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess, wait_until
from tests.support.worker_starts import starting

Start = Callable[..., WorkerProcess]


@pytest.fixture
def start(redis_server: RedisServer, namespace: str, tmp_path: Path) -> Iterator[Start]:
    yield from starting(
        tmp_path, lambda args, log: WorkerProcess(redis_server.url, namespace, args, log)
    )


@pytest.fixture
def beats(redis_client: redis.Redis, namespace: str) -> Heartbeats:
    return Heartbeats(redis_client, namespace)


def heartbeat(beats: Heartbeats, worker_id: str) -> WorkerInfo | None:
    raw = beats.redis.get(beats.key(worker_id))
    return None if raw is None else WorkerInfo.from_json(raw)


def test_a_running_worker_beats_with_its_queues_its_task_and_counts(
    start: Start, beats: Heartbeats, redis_client: redis.Redis, namespace: str
) -> None:
    blocking = Ledger(redis_client, namespace, "blocking")
    blocking.admit("job-1", "work")
    worker = start("blocking", "failing", "--worker-id", "hb-1", "--concurrency", "3")
    first = wait_until(lambda: heartbeat(beats, "hb-1"), what="the first heartbeat")
    assert (first.queues, first.concurrency) == (["blocking", "failing"], 3)
    assert (first.host, first.pid, first.state) == (
        socket.gethostname(),
        worker.process.pid,
        "running",
    )
    assert first.started_at <= first.beat_at
    # It expires on its own: a few beats long, never forever.
    assert 0 < redis_client.pttl(beats.key("hb-1")) <= 3_000
    assert redis_client.zscore(beats.index_key, "hb-1") is not None

    running = wait_until(
        lambda: (i := heartbeat(beats, "hb-1")) is not None and i.running,
        what="the heartbeat to show the running task",
    )
    (task,) = running
    assert (task["id"], task["queue"], task["name"], task["attempt"]) == (
        "job-1",
        "blocking",
        "wait_for_release",
        1,
    )
    record = blocking.resolve("job-1")
    assert record is not None and record.lease_until is not None
    assert task["since"] <= record.lease_until  # the claim's start, on the server clock

    # Counts go up: one completes; one fails after three attempts (two retries).
    Ledger(redis_client, namespace, "failing").admit("bad", "work")
    redis_client.set(f"{namespace}:release", 1)
    counted = wait_until(
        lambda: (
            (i := heartbeat(beats, "hb-1")) is not None
            and (i.processed, i.failed, i.retried) == (2, 1, 2)
            and not i.running
            and i
        ),
        what="the counts to reach 2 processed, 1 failed, 2 retried",
    )
    assert counted.lost == 0 and counted.beat_at >= first.beat_at
    assert [i.worker_id for i in beats.live()] == ["hb-1"]

    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    assert heartbeat(beats, "hb-1") is None
    assert redis_client.zscore(beats.index_key, "hb-1") is None
    assert beats.live() == []


def test_a_stopping_worker_says_so_until_its_task_ends(
    start: Start, beats: Heartbeats, redis_client: redis.Redis, namespace: str
) -> None:
    Ledger(redis_client, namespace, "blocking").admit("job-1", "work")
    worker = start("blocking", "--worker-id", "hb-2", "--concurrency", "1", "--no-repair")
    wait_until(
        lambda: (i := heartbeat(beats, "hb-2")) is not None and i.running,
        what="the task to run",
    )
    worker.signal(signal.SIGTERM)
    stopping = wait_until(
        lambda: (i := heartbeat(beats, "hb-2")) is not None and i.state == "stopping" and i,
        what="the heartbeat to say it is stopping",
    )
    assert [task["id"] for task in stopping.running] == ["job-1"]
    redis_client.set(f"{namespace}:release", 1)
    assert worker.wait() == 0, worker.output()
    assert heartbeat(beats, "hb-2") is None


def test_a_killed_worker_s_heartbeat_expires_on_its_own(
    start: Start, beats: Heartbeats, redis_client: redis.Redis
) -> None:
    worker = start("blocking", "--worker-id", "hb-3", "--no-repair")
    wait_until(lambda: heartbeat(beats, "hb-3"), what="the first heartbeat")
    worker.process.kill()
    worker.wait()
    assert redis_client.exists(beats.key("hb-3"))  # nobody removed it: it is left to expire
    wait_until(
        lambda: not redis_client.exists(beats.key("hb-3")),
        timeout=15,
        what="the dead worker's heartbeat to expire",
    )
    assert beats.live() == []
    assert redis_client.zscore(beats.index_key, "hb-3") is None  # live() pruned the index
