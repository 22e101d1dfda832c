"""``/healthz`` and ``/readyz`` of a real ``ledger_worker --metrics-port``, as a platform calls them.

Liveness fails within its bound once the main loop stands still (the documented seam
``DJANGO_LEDGER_TEST_STALL_FILE`` holds it) and passes again once it turns; readiness
fails while the worker drains for a stop, and while its Redis server is down past its
bound, and passes again once Redis is back, while liveness holds all along: a worker
waiting for Redis is not restarted.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import redis

from django_ledger import Ledger
from tests.support.http_get import get
from tests.support.redis_server import RedisServer, free_port
from tests.support.worker_process import WorkerProcess, wait_until

#: The bounds the tests run with: a second each, so a failure shows quickly.
BOUNDS = ["--healthz-max-age", "1", "--readyz-max-outage", "1"]


def status(port: int, path: str) -> int | None:
    answer = get(port, path)
    return None if answer is None else answer[0]


def test_healthz_fails_within_its_bound_while_the_loop_stands_still_and_readyz_while_it_drains(
    redis_server: RedisServer,
    redis_client: redis.Redis,
    namespace: str,
    tmp_path: Path,
    stall: Path,
) -> None:
    port = free_port()
    args = ["blocking", "--metrics-port", str(port), *BOUNDS, "--no-repair"]
    worker = WorkerProcess(redis_server.url, namespace, args, tmp_path / "worker.log")
    try:
        wait_until(lambda: status(port, "/readyz") == 200, what="the worker to be ready")
        assert get(port, "/healthz") == (200, "ok\n")
        stall.touch()
        answer = wait_until(
            lambda: (found := get(port, "/healthz")) and found[0] == 503 and found,
            what="/healthz to fail",
        )
        # Past its bound (1 s), never before it.
        stalled = re.fullmatch(r"loop stalled for (\d+) s\n?", answer[1])
        assert stalled is not None and int(stalled.group(1)) >= 1, answer
        stall.unlink()
        wait_until(lambda: status(port, "/healthz") == 200, what="/healthz to pass again")

        # A stop: not ready while the running task drains, alive all along.
        Ledger(redis_client, namespace, "blocking").admit("long", "work")
        wait_until(lambda: redis_client.hget(f"{namespace}:runs", "long"), what="the task to run")
        worker.signal(signal.SIGTERM)
        assert wait_until(lambda: get(port, "/readyz") == (503, "stopping\n"), what="stopping")
        assert status(port, "/healthz") == 200
        redis_client.set(f"{namespace}:release", 1)
        assert worker.wait() == 0, worker.output()
    finally:
        worker.stop()


def test_readyz_fails_while_redis_is_down_past_its_bound_and_passes_once_it_is_back(
    fresh_redis: RedisServer, tmp_path: Path
) -> None:
    port = free_port()
    namespace = "probed"
    # Liveness with room for a failing call on a loaded machine: it must hold all along.
    args = ["raw", "--metrics-port", str(port), "--healthz-max-age", "3"]
    args += ["--readyz-max-outage", "1"]
    worker = WorkerProcess(fresh_redis.url, namespace, args, tmp_path / "worker.log")
    try:
        wait_until(lambda: status(port, "/readyz") == 200, what="the worker to be ready")
        fresh_redis.kill()
        answer = wait_until(
            lambda: (found := get(port, "/readyz")) and found[0] == 503 and found,
            what="/readyz to fail",
        )
        assert answer[1].startswith("redis unreachable for ")
        assert namespace not in answer[1] and str(fresh_redis.port) not in answer[1]
        assert status(port, "/healthz") == 200  # waiting for Redis is no reason to restart
        fresh_redis.restart()
        wait_until(lambda: status(port, "/readyz") == 200, what="/readyz to pass again")
        client = fresh_redis.client()
        Ledger(client, namespace, "raw").admit("after", "x")
        wait_until(lambda: client.hget(f"{namespace}:runs", "after"), what="work again")
        assert status(port, "/nothing") == 404
        worker.signal(signal.SIGTERM)
        assert worker.wait() == 0, worker.output()
    finally:
        worker.stop()
