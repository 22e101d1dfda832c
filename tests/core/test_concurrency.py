"""Several processes claiming from the same queue: every record is claimed exactly once."""

from __future__ import annotations

import multiprocessing
import queue as queue_module
from datetime import timedelta
from typing import Any

import pytest
import redis

from django_ledger import Ledger, SettlementStatus, State
from django_ledger.core.runner import Runner
from tests.support.redis_server import RedisServer

WORKERS = 4
BATCH = 50


def claim_until_empty(
    url: str,
    namespace: str,
    queue: str,
    optimized: bool,
    owner: str,
    start: Any,
    results: Any,
) -> None:
    """Claim and complete records until none is pending; report the ids claimed."""
    client = redis.Redis.from_url(url)
    ledger = Ledger(client, namespace, queue, optimized=optimized)
    claimed: list[str] = []
    lost = 0
    try:
        start.wait(60)
        while True:
            claims = ledger.claim_many(owner, BATCH, lease=timedelta(minutes=10))
            if not claims:
                # An empty answer is only the end when nothing is left pending.
                if ledger.stats().pending == 0:
                    break
                continue
            claimed += [claim.request_id for claim in claims]
            settlements = ledger.settle_many([(claim, State.COMPLETED) for claim in claims])
            lost += sum(s.status is not SettlementStatus.SETTLED for s in settlements)
        results.put((owner, claimed, lost, None))
    except BaseException as error:  # reported to the test, which fails with it
        results.put((owner, claimed, lost, repr(error)))
    finally:
        client.close()


@pytest.mark.parametrize(
    ("optimized", "total"),
    [pytest.param(True, 10_000, id="optimized"), pytest.param(False, 1_000, id="reference")],
)
@pytest.mark.standalone_only(reason="its worker processes connect to the standalone URL")
def test_every_record_is_claimed_exactly_once(
    redis_server: RedisServer,
    redis_client: redis.Redis,
    namespace: str,
    optimized: bool,
    total: int,
) -> None:
    ledger = Ledger(redis_client, namespace, "work", optimized=optimized)
    ids = [f"job-{i:05d}" for i in range(total)]
    admissions = ledger.admit_many([(request_id, f"payload {request_id}") for request_id in ids])
    assert all(a.status.value == "ADMITTED" for a in admissions)

    # fork starts fast; spawn where there is no fork. Children open their own clients.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
    start = context.Event()
    results = context.Queue()
    processes = [
        context.Process(
            target=claim_until_empty,
            args=(redis_server.url, namespace, "work", optimized, f"worker-{n}", start, results),
        )
        for n in range(WORKERS)
    ]
    for process in processes:
        process.start()
    reports = []
    try:
        start.set()
        for _ in processes:
            reports.append(results.get(timeout=120))
    except queue_module.Empty:
        pytest.fail(f"only {len(reports)} of {WORKERS} workers reported within 120 s")
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join()

    assert [error for *_, error in reports] == [None] * WORKERS
    claimed = [request_id for _, ids_of_one, _, _ in reports for request_id in ids_of_one]
    assert len(claimed) == len(set(claimed)), "a record was claimed twice"
    assert sorted(claimed) == ids, "a record was never claimed"
    assert sum(lost for _, _, lost, _ in reports) == 0
    # Each record ended as the one claim that took it: its owner, first attempt.
    owner_of = {
        request_id: owner for owner, ids_of_one, _, _ in reports for request_id in ids_of_one
    }
    records = ledger.resolve_many(ids)
    assert all(r is not None and r.state is State.COMPLETED for r in records)
    assert {r.attempts for r in records if r is not None} == {1}
    # Every claim took its own fence from the queue-wide counter, whichever process made it.
    fences = [r.fence for r in records if r is not None]
    assert len(set(fences)) == len(fences) == len(ids)
    assert all(r is not None and r.owner == owner_of[r.request_id] for r in records)
    stats = ledger.stats()
    assert (stats.pending, stats.claimed, stats.completed) == (0, 0, total)


def test_reference_claim_losing_a_race_still_takes_the_next_due_record(
    redis_client: redis.Redis, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = Ledger(redis_client, namespace, "race", optimized=False)
    rival = Ledger(redis_client, namespace, "race", optimized=False)
    ledger.admit("first", "p")
    ledger.admit("second", "p", delay=0.001)
    ledger.clock_skew_ms = rival.clock_skew_ms = 1_000
    read = Runner.now_and_raw
    raced: list[str] = []

    def rival_claims_first(on: Runner, request_id: str) -> Any:
        # The rival's claim lands between this claim's index read and its record read.
        if on is ledger.runner and not raced:
            won = rival.claim("rival")
            assert won is not None
            raced.append(won.request_id)
        return read(on, request_id)

    monkeypatch.setattr(Runner, "now_and_raw", rival_claims_first)
    claim = ledger.claim("worker")
    assert raced == ["first"]
    assert claim is not None and claim.request_id == "second"
