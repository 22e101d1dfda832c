"""``ledger_worker --burst`` repairs before it decides nothing is due (a cron-driven worker).

A record whose worker died stays CLAIMED with an expired lease until something repairs
it; a burst run is often the only process a deployment runs, so it must sweep expired
leases itself, run what that gave back, and say what it repaired: on the optimized path
and on its reference twin (``OPTIMIZED: False``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from django_ledger import Ledger, State
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess, wait_until
from tests.support.worker_variants import VariantWorker

#: Worker settings declaring ``raw_ref``, the reference twin of the raw queue ``raw``.
REFERENCE_SETTINGS = "tests.support.reference_worker_settings"


@pytest.fixture
def worker_log(tmp_path: Path) -> Path:
    return tmp_path / "worker.log"


@pytest.fixture
def burst() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def _expired_claim(ledger: Ledger, request_id: str) -> None:
    """Claim ``request_id`` for an owner that then dies: its lease runs out on the server."""
    ledger.admit(request_id, f"payload {request_id}")
    claim = ledger.claim("dead-worker", lease=0.05)
    assert claim is not None and claim.request_id == request_id
    wait_until(lambda: ledger.stats().expired_leases == 1, what="the lease to expire")


@pytest.mark.parametrize("optimized", [True, False], ids=["optimized", "reference"])
def test_a_burst_run_repairs_an_expired_lease_and_runs_the_task(
    redis_server: RedisServer,
    redis_client: redis.Redis,
    namespace: str,
    worker_log: Path,
    burst: list[WorkerProcess],
    optimized: bool,
) -> None:
    queue = "raw" if optimized else "raw_ref"
    raw = Ledger(redis_client, namespace, queue, optimized=optimized)
    _expired_claim(raw, "orphan-1")
    args = [queue, "--burst"]
    if optimized:
        worker = WorkerProcess(redis_server.url, namespace, args, worker_log)
    else:
        worker = VariantWorker(
            redis_server.url, namespace, args, worker_log, settings=REFERENCE_SETTINGS
        )
    burst.append(worker)
    assert worker.wait(60) == 0, worker.output()
    record = raw.resolve("orphan-1")
    assert record is not None and record.state is State.COMPLETED, worker.output()
    runs = {k.decode(): int(v) for k, v in redis_client.hgetall(f"{namespace}:runs").items()}
    assert runs == {"orphan-1": 1}
    # The second claim is attempt 2: the dead owner's claim was spent (it started, for
    # all anyone knows), and the summary says what the run repaired.
    assert record.attempts == 2
    assert "expired=1" in worker.output()


def test_a_burst_run_with_nothing_to_repair_says_so(
    redis_server: RedisServer, namespace: str, worker_log: Path, burst: list[WorkerProcess]
) -> None:
    worker = WorkerProcess(redis_server.url, namespace, ["raw", "--burst"], worker_log)
    burst.append(worker)
    assert worker.wait(60) == 0, worker.output()
    assert "repaired nothing" in worker.output()
