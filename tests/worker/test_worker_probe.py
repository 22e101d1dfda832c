"""``manage.py ledger_status --worker ID --max-age S``: an exec probe of a real worker process.

The probe exits 0 while the worker's heartbeat is there and its main loop turned within
``--max-age``; 1 once the loop stands still (the documented test seam
``DJANGO_LEDGER_TEST_STALL_FILE`` holds it), the worker was killed, or none runs. A task
the loop runs itself, its lease renewed, keeps it fresh.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import redis

from django_ledger import Ledger
from tests.support.redis_server import RedisServer
from tests.support.worker_process import ROOT, WorkerProcess, wait_until

MAX_AGE = "3"


def probe(
    redis_server: RedisServer, namespace: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """Run the probe as Kubernetes would: a fresh ``manage.py`` process."""
    env = {
        **os.environ,
        "REDIS_URL": redis_server.url,
        "LEDGER_NAMESPACE": namespace,
        "DJANGO_SETTINGS_MODULE": "tests.support.worker_settings",
        "PYTHONPATH": str(ROOT),
    }
    argv = [sys.executable, "manage.py", "ledger_status", *args]
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)


def test_the_probe_fails_while_the_loop_stands_still_and_after_a_kill(
    redis_server: RedisServer,
    redis_client: redis.Redis,
    namespace: str,
    tmp_path: Path,
    stall: Path,
) -> None:
    """Each state is awaited on the heartbeat in Redis, then the probe asked once."""

    def check(*args: str) -> subprocess.CompletedProcess[str]:
        return probe(redis_server, namespace, *args, "--max-age", MAX_AGE)

    def loop_age_ms() -> int | None:
        """How long ago, by the server's clock, the worker's loop last turned."""
        raw = redis_client.get(f"{namespace}:worker:probed")
        if raw is None:
            return None
        seconds, micros = redis_client.time()
        return seconds * 1000 + micros // 1000 - int(json.loads(raw)["loop_at"])

    def stale() -> bool:
        age = loop_age_ms()
        return age is None or age > 1000 * int(MAX_AGE) + 500

    # "blocking" leases last 2 s: the worker beats every 2/3 s.
    args = ["blocking", "--worker-id", "probed", "--no-repair"]
    worker = WorkerProcess(redis_server.url, namespace, args, tmp_path / "worker.log")
    try:
        wait_until(lambda: loop_age_ms() is not None, what="the worker's first heartbeat")
        fresh = check("--worker", "probed")
        assert fresh.returncode == 0, fresh.stderr
        assert "worker probed is fresh" in fresh.stdout
        assert check("--worker-of", "blocking").returncode == 0
        stall.touch()
        wait_until(stale, what="the loop to stand still past --max-age")
        stood = check("--worker", "probed")
        assert stood.returncode == 1, stood.stdout
        assert "worker probed is stale: its loop last turned" in stood.stderr
        assert check("--worker-of", "blocking").returncode == 1
        stall.unlink()
        wait_until(lambda: (loop_age_ms() or 10**9) < 1000, what="the loop to turn again")
        assert check("--worker", "probed").returncode == 0
        worker.process.kill()
        worker.wait()
        wait_until(stale, what="the killed worker's heartbeat to age or go")
        dead = check("--worker", "probed")
        assert dead.returncode == 1 and "worker probed" in dead.stderr
    finally:
        worker.stop()
    nobody = check("--worker-of", "raw")
    assert nobody.returncode == 1 and "no worker of queue raw" in nobody.stderr
    assert check("--worker", "nobody").returncode == 1


def test_a_long_task_the_loop_runs_itself_keeps_the_worker_fresh(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    Ledger(redis_client, namespace, "blocking").admit("long", "work")
    args = ["blocking", "--worker-id", "busy", "--concurrency", "1", "--no-repair"]
    worker = WorkerProcess(redis_server.url, namespace, args, tmp_path / "worker.log")
    try:
        (job,) = wait_until(
            lambda: (
                redis_client.exists(f"{namespace}:worker:busy")
                and heartbeat(redis_client, namespace)["running"]
            ),
            what="a heartbeat of the task running",
        )
        since = job["since"]

        def loop_seen_past_max_age() -> bool:
            return heartbeat(redis_client, namespace)["loop_at"] > since + 1000 * int(MAX_AGE)

        wait_until(loop_seen_past_max_age, what="the task to outlast --max-age")
        answer = probe(redis_server, namespace, "--worker", "busy", "--max-age", MAX_AGE)
        assert answer.returncode == 0, answer.stderr
        redis_client.set(f"{namespace}:release", 1)
        worker.signal(signal.SIGTERM)
        assert worker.wait(60) == 0, worker.output()
    finally:
        worker.stop()


def heartbeat(client: redis.Redis, namespace: str) -> dict[str, Any]:
    raw = client.get(f"{namespace}:worker:busy")
    assert raw is not None
    found: dict[str, Any] = json.loads(raw)
    return found


def test_a_max_age_that_cannot_work_is_refused(redis_server: RedisServer, namespace: str) -> None:
    answer = probe(redis_server, namespace, "--worker", "any", "--max-age", "0")
    assert answer.returncode == 1 and "--max-age must be more than 0" in answer.stderr
