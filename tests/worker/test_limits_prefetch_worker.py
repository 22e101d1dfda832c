"""Prefetch under a rate through real worker processes: held claims are taken while the
bucket has headroom, and the starts stay within LIMIT + BURST in any period. The tasks
record on the server clock when the rate counts them started: a held claim when its
work begins (which is after its token was spent), any other at its claim.

Nothing here asserts a wall-clock time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import redis

from django_ledger import Ledger
from tests.support.redis_server import RedisServer
from tests.support.worker_process import wait_until

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.standalone_only(
    reason="its worker processes connect to the standalone URL"
)


def test_held_claims_under_a_rate_start_within_limit_plus_burst(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    n = 300  # 100/s, burst 40: about 3 s
    ledger = Ledger(redis_client, namespace, "paced")
    ledger.admit_many((f"t{i:03d}", "{}") for i in range(n))
    env = {
        **os.environ,
        "REDIS_URL": redis_server.url,
        "LEDGER_NAMESPACE": namespace,
        "DJANGO_SETTINGS_MODULE": "tests.support.limits_prefetch_worker_settings",
        "PYTHONPATH": str(ROOT),
    }
    processes = []
    for k in range(2):
        log = (tmp_path / f"worker{k}.log").open("wb")
        processes.append(
            subprocess.Popen(
                [sys.executable, "manage.py", "ledger_worker", "paced", "--concurrency", "8"],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
    try:
        wait_until(lambda: ledger.stats().completed == n, timeout=90, what=f"{n} tasks done")
    finally:
        for process in processes:
            process.send_signal(signal.SIGTERM)
        for process in processes:
            process.wait(30)
    entries = [e.decode().split(":") for e in redis_client.lrange(f"{namespace}:starts", 0, -1)]
    assert len(entries) == n
    assert sum(int(held) for _, held in entries) > 0  # some claims were prefetched
    starts = sorted(int(at) for at, _ in entries)
    for i, first in enumerate(starts):
        within = sum(1 for t in starts[i:] if t < first + 1000)
        assert within <= 100 + 40, (i, within)
    assert max(r.attempts for r in ledger.resolve_many([f"t{i:03d}" for i in range(n)])) == 1
