"""The fence through a worker: a worker whose lease lapsed and who then reclaimed the same
record has the settlement of its old claim refused, though the owner is the same.

In-process, on the suite's Redis: the worker's own ledger has its clock moved past the
lease (``clock_skew_ms``, the test seam), so its own repairer takes the record back and
its own main loop claims it again while the first run still holds its old claim. In both
ledger modes (the ``optimized`` fixture).
"""

from __future__ import annotations

import threading

import redis

from django_ledger import Ledger, State
from django_ledger.core.worker import Job
from django_ledger.core.worker.handler import CallableHandler
from django_ledger.core.worker.runtime import Worker, WorkerConfig
from tests.support.worker_process import wait_until

pytest_plugins = ["tests.support.ledger_fixtures"]

LEASE = 60.0


def test_a_reclaimed_records_old_claim_is_refused_when_settled(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    ledger = Ledger(redis_client, namespace, "fence", optimized=optimized)
    assert ledger.admit("r-1", "work").accepted
    first_started, release = threading.Event(), threading.Event()
    fences: list[int] = []

    def handle(job: Job) -> str:
        fences.append(job.claim.fence)
        if job.claim.attempt == 1:
            first_started.set()
            assert release.wait(30)
            return "from the lapsed claim"
        return "from the new claim"

    worker = Worker(
        {"fence": ledger},
        {"fence": CallableHandler(handle, max_attempts=5)},
        {"fence": LEASE},
        WorkerConfig(worker_id="w-1", concurrency=2, repair_interval=0.05),
    )
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    try:
        assert first_started.wait(30)
        ledger.clock_skew_ms += int(LEASE * 1000) + 1_000  # the first claim's lease lapsed
        wait_until(lambda: len(fences) == 2, what="the same worker reclaimed the record")
        wait_until(lambda: ledger.resolve("r-1").state is State.COMPLETED)  # type: ignore[union-attr]
        release.set()  # the first run now ends and settles with its old claim
        wait_until(lambda: worker.counts.lost == 1, what="the old claim's settlement refused")
    finally:
        release.set()
        worker.request_stop()
        runner.join(30)
    assert not runner.is_alive()
    record = ledger.resolve("r-1")
    assert record is not None and record.state is State.COMPLETED
    assert (record.owner, record.attempts, record.fence) == ("w-1", 2, fences[1])
    assert fences[0] < fences[1]
    assert ledger.results(["r-1"]) == [b"from the new claim"]
    assert (worker.counts.processed, worker.counts.lost) == (1, 1)
