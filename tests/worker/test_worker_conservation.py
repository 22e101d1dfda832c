"""Conservation through real ``ledger_worker`` processes, short run (the long one:
``benchmarks/worker_conservation.py``).

3,000 identities admitted by 2 producers, drained by 3 ``manage.py ledger_worker``
processes (``tests.support.bench_settings``' ``conserve`` queue, whose handler logs each run
outside Redis), while workers are SIGKILLed mid-run and SIGTERMed (each restarted), Redis
is SIGKILLed and restarted from its AOF (``appendfsync always``) and the ledger's functions
are flushed. Then every identity must be COMPLETED once, and every run but the last of an
identity explained by a lease that ended; see ``tests/support/harness/worker_experiment.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from django_ledger import Ledger, State
from tests.support.harness.config import payload_of, request_id
from tests.support.harness.worker_experiment import (
    WORKER_FAULTS,
    WorkerRun,
    check_runs,
    run_workers,
)
from tests.support.harness.worker_fleet import WorkerFleet


@pytest.mark.standalone_only(reason="its workers and faults use a private server's REDIS_URL")
def test_every_identity_completes_once_through_killed_and_stopped_workers(
    tmp_path: Path,
) -> None:
    run = WorkerRun(identities=3_000, workers=3, duration=16.0, workdir=str(tmp_path))

    outcome = run_workers(run, echo=print)

    print(outcome.table)
    assert all(outcome.count(kind) >= 1 for kind in WORKER_FAULTS), outcome.faults
    assert any(f.mid_run for f in outcome.faults if f.kind == "worker_kill"), outcome.faults
    assert outcome.drained, "the queue did not drain"
    assert outcome.findings.admitted == 3_000
    assert outcome.lost == 0
    assert outcome.ended_twice == 0
    assert outcome.findings.unexplained == []
    # A worker killed mid-run cut a run short: that identity ran again, and it says why.
    assert outcome.findings.explained["its worker was SIGKILLed"] >= 1
    assert outcome.passed, outcome.table


# -- the check itself can fail ---------------------------------------------------------


def _finished_run(
    tmp_path: Path, redis_client: redis.Redis, namespace: str
) -> tuple[WorkerRun, Ledger, WorkerFleet]:
    """Three identities, each claimed, run and completed once, logged as a run logs them."""
    run = WorkerRun(identities=3, namespace=namespace, workdir=str(tmp_path))
    config = run.harness_config()
    ledger = Ledger(redis_client, namespace, run.queue, **config.ledger_kwargs())
    workers = WorkerFleet(tmp_path, "redis://unused", namespace, run.queue, 0)
    config.path("logs").mkdir(parents=True, exist_ok=True)
    acknowledged, began, outcomes = [], [], []
    for n in range(3):
        ledger.admit(request_id(n), payload_of(n))
        acknowledged.append(f"A\t{request_id(n)}")
    for claim in ledger.claim_many("w0.0", 3):
        began += [
            f"B\t{claim.request_id}\t{claim.fence}\t{claim.attempt}\tw0.0\t1.0",
            f"E\t{claim.request_id}\t{claim.fence}",
        ]
        assert ledger.settle(claim, State.COMPLETED).ok
        outcomes.append(
            f"2026-01-01 00:00:00,000 INFO outcome=completed queue={run.queue} task=record_run "
            f"id={claim.request_id} attempt={claim.attempt} fence={claim.fence} seconds=0.001"
        )
    (config.path("logs") / "producer-0-0.log").write_text("\n".join([*acknowledged, "Z"]) + "\n")
    (workers.runs_dir / "runs-w0.0.log").write_text("\n".join(began) + "\n")
    (workers.out_dir / "w0.0.out").write_text("\n".join(outcomes) + "\n")
    return run, ledger, workers


def test_the_check_passes_a_clean_run(
    tmp_path: Path, redis_client: redis.Redis, namespace: str
) -> None:
    run, _, workers = _finished_run(tmp_path, redis_client, namespace)

    harness, found = check_runs(run.harness_config(), redis_client, workers)

    assert harness.passed and not found.problems and not found.unexplained, found
    assert (found.admitted, found.completed, found.runs, found.ran_again) == (3, 3, 3, 0)


def test_the_check_finds_a_lost_identity(
    tmp_path: Path, redis_client: redis.Redis, namespace: str
) -> None:
    run, ledger, workers = _finished_run(tmp_path, redis_client, namespace)
    redis_client.hdel(ledger.records_key, request_id(1))

    _, found = check_runs(run.harness_config(), redis_client, workers)

    assert found.lost == {request_id(1)}


def test_the_check_finds_an_identity_ended_twice(
    tmp_path: Path, redis_client: redis.Redis, namespace: str
) -> None:
    run, _, workers = _finished_run(tmp_path, redis_client, namespace)
    with (workers.out_dir / "w1.0.out").open("a") as out:
        out.write(
            "2026-01-01 00:00:01,000 INFO outcome=completed queue=conserve task=record_run "
            f"id={request_id(2)} attempt=2 fence=99 seconds=0.001\n"
        )

    harness, found = check_runs(run.harness_config(), redis_client, workers)

    assert found.ended_twice == {request_id(2)}
    assert request_id(2) in harness.duplicated


def test_the_check_finds_a_run_again_that_nothing_explains(
    tmp_path: Path, redis_client: redis.Redis, namespace: str
) -> None:
    run, ledger, workers = _finished_run(tmp_path, redis_client, namespace)
    record = ledger.resolve(request_id(0))
    assert record is not None
    # An earlier run, on a worker that lived on and was never answered LOST.
    with (workers.runs_dir / "runs-w1.0.log").open("a") as runs:
        runs.write(f"B\t{request_id(0)}\t{record.fence - 1}\t1\tw1.0\t0.5\n")

    _, found = check_runs(run.harness_config(), redis_client, workers)

    assert [line.split(":")[0] for line in found.unexplained] == [
        f"{request_id(0)} fence {record.fence - 1}"
    ]
