"""Flow limits through real worker processes (several processes, threads in each).

The tasks record on the Redis server what ran at once and when each started (server
clock), so nothing here asserts a wall-clock time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from statistics import linear_regression

import pytest
import redis

from django_ledger import Ledger
from tests.support.redis_server import RedisServer
from tests.support.worker_process import wait_until

ROOT = Path(__file__).resolve().parents[2]
# The worker processes connect to the standalone URL; the cluster run covers the limits
# through tests/core/test_limits_claim.py.
pytestmark = pytest.mark.standalone_only(
    reason="its worker processes connect to the standalone URL"
)


@pytest.fixture
def workers(redis_server: RedisServer, namespace: str, tmp_path: Path) -> Iterator[list]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> None:
        env = {
            **os.environ,
            "REDIS_URL": redis_server.url,
            "LEDGER_NAMESPACE": namespace,
            "DJANGO_SETTINGS_MODULE": "tests.support.limits_worker_settings",
            "PYTHONPATH": str(ROOT),
        }
        log = (tmp_path / f"worker{len(started)}.log").open("wb")
        started.append(
            subprocess.Popen(
                [sys.executable, "manage.py", "ledger_worker", *args],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )

    start.started = started  # type: ignore[attr-defined]  # the processes, to kill one
    yield start  # type: ignore[misc]
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in started:
        try:
            process.wait(20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def queue(client: redis.Redis, namespace: str, name: str, n: int) -> Ledger:
    ledger = Ledger(client, namespace, name)
    ledger.admit_many((f"t{i:03d}", "{}") for i in range(n))
    return ledger


def test_concurrency_2_over_two_workers_of_4_threads_never_runs_a_third(
    redis_client: redis.Redis, namespace: str, workers: list
) -> None:
    ledger = queue(redis_client, namespace, "narrow", 30)
    start = workers  # the fixture starts processes
    for _ in range(2):
        start("narrow", "--concurrency", "4")  # type: ignore[operator]
    wait_until(lambda: ledger.stats().completed == 30, timeout=60, what="30 tasks done")
    assert int(redis_client.get(f"{namespace}:most") or 0) == 2  # reached, never passed
    assert max(r.attempts for r in ledger.resolve_many([f"t{i:03d}" for i in range(30)])) == 1


def test_a_rate_through_workers_starts_at_most_limit_plus_burst_in_any_period(
    redis_client: redis.Redis, namespace: str, workers: list
) -> None:
    ledger = queue(redis_client, namespace, "metered", 45)  # 20/s, burst 5: about 2 s
    start = workers
    for _ in range(2):
        start("metered", "--concurrency", "4")  # type: ignore[operator]
    wait_until(lambda: ledger.stats().completed == 45, timeout=60, what="45 tasks done")
    # The server clock of each claim: its lease end less the 30 s lease (a held claim's
    # start comes later: tests/worker/test_limits_prefetch_worker.py records starts).
    starts = sorted(int(t) - 30_000 for t in redis_client.lrange(f"{namespace}:leases", 0, -1))
    assert len(starts) == 45
    # Any window of one period (1000 ms of the server clock) holds at most LIMIT + BURST.
    for i, first in enumerate(starts):
        within = sum(1 for t in starts[i:] if t < first + 1000)
        assert within <= 20 + 5, (i, within)


def test_concurrency_3_over_four_workers_of_8_threads_never_runs_a_fourth(
    redis_client: redis.Redis, namespace: str, workers: list
) -> None:
    ledger = queue(redis_client, namespace, "exports", 40)
    redis_client.set(ledger.fences_key, 1000)  # counted from here: one fence a claim
    start = workers
    for _ in range(4):
        start("exports", "--concurrency", "8")  # type: ignore[operator]
    wait_until(lambda: ledger.stats().completed == 40, timeout=90, what="40 tasks done")
    assert int(redis_client.get(f"{namespace}:most") or 0) == 3  # reached, never passed
    records = ledger.resolve_many([f"t{i:03d}" for i in range(40)])
    assert all(r is not None and r.attempts == 1 for r in records)
    # Each record claimed once: no claim was made and given back while the limit held.
    assert int(redis_client.get(ledger.fences_key) or 0) - 1000 == 40


def test_a_rate_of_50_a_second_holds_its_windows_and_its_average(
    redis_client: redis.Redis, namespace: str, workers: list
) -> None:
    n = 160  # burst 10, then 150 at 50/s: about 3 s
    ledger = queue(redis_client, namespace, "payments", n)
    start = workers
    for _ in range(3):
        start("payments", "--concurrency", "4")  # type: ignore[operator]
    wait_until(lambda: ledger.stats().completed == n, timeout=90, what=f"{n} tasks done")
    starts = sorted(int(t) - 30_000 for t in redis_client.lrange(f"{namespace}:leases", 0, -1))
    assert len(starts) == n
    for i, first in enumerate(starts):
        within = sum(1 for t in starts[i:] if t < first + 1000)
        assert within <= 50 + 10, (i, within)
    # Past the burst, work is plentiful: the claims come at the rate. On average never
    # faster than it (within 5 %); and at its pace, within 5 %: the slope of claim times
    # against claim numbers, which one claim made late (its worker waiting for a CPU, on
    # a loaded machine) barely moves, where it would stretch a first-to-last average.
    steady = starts[10:]
    rate = (len(steady) - 1) * 1000 / (steady[-1] - steady[0])
    assert rate <= 50 * 1.05, rate
    pace = 1000 / linear_regression(range(len(steady)), steady).slope
    assert 50 * 0.95 <= pace <= 50 * 1.05, (pace, steady)
