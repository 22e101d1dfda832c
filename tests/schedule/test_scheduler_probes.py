"""A real ``ledger_scheduler``'s probes: ``/healthz``, ``/readyz`` and ``ledger_status --scheduler``.

Liveness fails once the tick loop stands still (the documented test seam) and passes
again; readiness fails while the scheduler's own Redis server is down past its bound
and passes once it is back; the exec probe passes while the node ticks and fails once it
has stopped (``tests/schedule/test_scheduler_command.py`` runs that command).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from django_ledger.core.probes import STALL_FILE_ENV
from django_ledger.core.schedule import ScheduleStore
from tests.support.redis_server import RedisServer, free_port
from tests.support.worker_process import wait_until

ROOT = Path(__file__).resolve().parents[2]
NODE = "probed-node"


def status(port: int, path: str) -> int | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError):
        return None


@pytest.mark.standalone_only(
    reason="the scheduler runs on a server of its own, killed and restarted"
)
def test_the_schedulers_probes_follow_its_loop_and_its_redis(
    fresh_redis: RedisServer, tmp_path: Path
) -> None:
    stall = tmp_path / "stall"
    env = {
        **os.environ,
        "REDIS_URL": fresh_redis.url,
        "DJANGO_SETTINGS_MODULE": "testproject.settings",
        "LEDGER_NAMESPACE": "probed",
        "LEDGER_SCHEDULES": json.dumps({}),
        "PYTHONPATH": str(ROOT),
        STALL_FILE_ENV: str(stall),
    }

    port = free_port()
    argv = [sys.executable, "manage.py", "ledger_scheduler", "--interval", "0.2"]
    argv += ["--node-id", NODE, "--metrics-port", str(port)]
    # A tick that fails on a loaded machine may take a second or more: the liveness bound
    # leaves it room, so Redis away is never taken for a stalled loop.
    argv += ["--healthz-max-age", "3", "--readyz-max-outage", "1"]
    with (tmp_path / "scheduler.log").open("wb") as log:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: status(port, "/readyz") == 200, what="the scheduler to be ready")
        assert status(port, "/healthz") == 200
        store = ScheduleStore(fresh_redis.client(), "probed")
        assert store.published_at(NODE) is not None  # what ledger_status --scheduler reads

        stall.touch()
        wait_until(lambda: status(port, "/healthz") == 503, timeout=15, what="/healthz to fail")
        stall.unlink()
        wait_until(lambda: status(port, "/healthz") == 200, what="/healthz to pass again")

        fresh_redis.kill()
        wait_until(lambda: status(port, "/readyz") == 503, timeout=10, what="/readyz to fail")
        assert status(port, "/healthz") == 200  # the loop waits for Redis: it is alive
        fresh_redis.restart()
        wait_until(lambda: status(port, "/readyz") == 200, what="/readyz to pass again")

        process.send_signal(signal.SIGTERM)
        assert process.wait(30) == 0
        assert ScheduleStore(fresh_redis.client(), "probed").published_at(NODE) is None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
