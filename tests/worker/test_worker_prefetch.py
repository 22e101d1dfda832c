"""A worker's prefetched claims that never started: not shown running, no attempt spent.

``ledger_worker --concurrency 4`` (prefetch 4) holds 8 claims while 4 jobs run. The 4
held ones are claimed, not started: their tasks show READY, and when the worker is
SIGKILLed, repair gives their attempts back (no ``LeaseExpired`` in their history),
while the 4 that started spend theirs: on the optimized path and on its reference twin
(``OPTIMIZED: False``).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from django_ledger import Ledger, State
from django_ledger.tasks.state import LEASE_EXPIRED_PATH, task_state
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess, wait_until
from tests.support.worker_variants import VariantWorker

#: Worker settings declaring ``blocking_ref``, the reference twin of ``blocking``.
REFERENCE_SETTINGS = "tests.support.reference_worker_settings"


@pytest.fixture
def workers() -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop()


def _started(client: redis.Redis, namespace: str) -> set[str]:
    return {line.split()[0].decode() for line in client.lrange(f"{namespace}:started", 0, -1)}


@pytest.mark.parametrize("optimized", [True, False], ids=["optimized", "reference"])
def test_sigkill_with_prefetched_claims_spends_only_the_started_attempts(
    redis_server: RedisServer,
    redis_client: redis.Redis,
    namespace: str,
    tmp_path: Path,
    workers: list[WorkerProcess],
    optimized: bool,
) -> None:
    queue = "blocking" if optimized else "blocking_ref"  # 2 s leases, jobs that wait
    blocking = Ledger(redis_client, namespace, queue, optimized=optimized)
    ids = [f"slow-{n}" for n in range(8)]
    blocking.admit_many([(request_id, "work") for request_id in ids])
    args = [queue, "--concurrency", "4", "--no-repair"]
    log = tmp_path / "worker.log"
    if optimized:
        worker = WorkerProcess(redis_server.url, namespace, args, log)
    else:
        worker = VariantWorker(redis_server.url, namespace, args, log, settings=REFERENCE_SETTINGS)
    workers.append(worker)
    wait_until(lambda: len(_started(redis_client, namespace)) == 4, what="4 jobs to start")
    wait_until(lambda: blocking.stats().claimed == 8, what="8 claims in hand")
    ran = _started(redis_client, namespace)
    records = {r.request_id: r for r in blocking.resolve_many(ids) if r is not None}
    statuses = {i: task_state(queue, records[i], None).status for i in ids}
    assert statuses == {i: "RUNNING" if i in ran else "READY" for i in ids}, worker.output()

    worker.signal(signal.SIGKILL)
    worker.wait()
    wait_until(lambda: blocking.stats().expired_leases == 8, what="the leases to expire")
    for _ in blocking.repair_cycle():
        pass
    after = {r.request_id: r for r in blocking.resolve_many(ids) if r is not None}
    assert {i: (after[i].state, after[i].attempts) for i in ids} == {
        i: (State.PENDING, 1 if i in ran else 0) for i in ids
    }
    for request_id in ids:
        errors = task_state(queue, after[request_id], None).errors
        paths = [error["exception_class_path"] for error in errors]
        assert paths == ([LEASE_EXPIRED_PATH] if request_id in ran else [])


def test_a_held_claim_whose_lease_lapsed_while_paused_never_starts_on_it(
    redis_server: RedisServer,
    redis_client: redis.Redis,
    namespace: str,
    tmp_path: Path,
    workers: list[WorkerProcess],
) -> None:
    """SIGSTOP past the lease: on SIGCONT, a prefetched claim is renewed before it starts.

    While the worker is paused, repair gives the held claim back without spending its
    attempt. The job threads resume first (their jobs end on a file, with no round trip)
    and take the held claim at once: started on its old lease, it would run under the
    same attempt number as the claim that runs it next.
    """
    client = redis_client
    ledger = Ledger(client, namespace, "filewait")  # 1 s leases
    release = tmp_path / "release"
    ids = ["a", "b", "c"]
    ledger.admit_many([(request_id, str(release)) for request_id in ids])
    worker = WorkerProcess(
        redis_server.url,
        namespace,
        ["filewait", "--concurrency", "2", "--prefetch", "1", "--no-repair"],
        tmp_path / "worker.log",
    )
    workers.append(worker)
    wait_until(lambda: len(_started(client, namespace)) == 2, what="2 jobs to start")
    wait_until(lambda: ledger.stats().claimed == 3, what="3 claims in hand")
    worker.signal(signal.SIGSTOP)
    try:
        wait_until(lambda: ledger.stats().expired_leases == 3, what="the leases to lapse")
        for _ in ledger.repair_cycle():
            pass
        release.touch()
    finally:
        worker.signal(signal.SIGCONT)
    wait_until(
        lambda: all(r is not None and r.state is State.COMPLETED for r in ledger.resolve_many(ids)),
        what="every record completed",
    )
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    runs: dict[str, list[int]] = {request_id: [] for request_id in ids}
    for line in client.lrange(f"{namespace}:started", 0, -1):
        request_id, _, attempt, _ = line.decode().split()
        runs[request_id].append(int(attempt))
    records = {r.request_id: r for r in ledger.resolve_many(ids) if r is not None}
    # Every run has an attempt of its own, and every attempt counted had its run.
    assert {i: sorted(runs[i]) for i in ids} == {
        i: list(range(1, records[i].attempts + 1)) for i in ids
    }, worker.output()
