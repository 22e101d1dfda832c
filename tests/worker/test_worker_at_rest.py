"""A worker's repair at rest: once a worker has made its first pass and claims nothing, a
queue with nothing to run and every record where its indexes say starts no pass over its
records; work it claims, or counts that disagree, start one.

In-process workers on the suite's Redis, in both ledger modes (the ``optimized``
fixture), with a short repair interval. The worker's ledger is the one the test made; the
test counts its ``repair_page`` calls (a pass's pages) and ``sweep`` calls (the
index-driven half every interval runs) by wrapping those two methods, which still run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import redis

from django_ledger import Ledger, State
from django_ledger.core.worker import Job
from django_ledger.core.worker.handler import CallableHandler
from django_ledger.core.worker.runtime import Worker, WorkerConfig
from tests.support.worker_process import wait_until

pytest_plugins = ["tests.support.ledger_fixtures"]

QUEUE = "rest"


def ended_queue(client: redis.Redis, namespace: str, optimized: bool, n: int) -> Ledger:
    """A queue holding ``n`` records, every one COMPLETED."""
    ledger = Ledger(client, namespace, QUEUE, optimized=optimized)
    ledger.admit_many([(f"done-{i:03d}", "work") for i in range(n)])
    claims = ledger.claim_many("earlier", n)
    ledger.settle_many([(claim, State.COMPLETED) for claim in claims])
    return ledger


def counted(ledger: Ledger) -> dict[str, int]:
    """Count the ledger's ``repair_page`` and ``sweep`` calls from here on."""
    calls = {"repair_page": 0, "sweep": 0}
    for name in calls:
        real: Callable[..., Any] = getattr(ledger, name)

        def wrapped(*args: Any, _real: Callable[..., Any] = real, _name: str = name) -> Any:
            calls[_name] += 1
            return _real(*args)

        setattr(ledger, name, wrapped)
    return calls


@contextmanager
def running(ledger: Ledger, handle: Callable[[Job], object]) -> Iterator[Worker]:
    worker = Worker(
        {QUEUE: ledger},
        {QUEUE: CallableHandler(handle, max_attempts=3)},
        {QUEUE: 30.0},
        WorkerConfig(worker_id="w-rest", concurrency=2, repair_interval=0.02),
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(30)
    assert not thread.is_alive()


@contextmanager
def rested(ledger: Ledger) -> Iterator[tuple[dict[str, int], list[str], int]]:
    """A worker on ``ledger`` past its first pass and at rest: its counted calls, the ids it
    ran, and its ``repair_page`` calls so far."""
    calls = counted(ledger)
    ran: list[str] = []
    with running(ledger, lambda job: ran.append(job.claim.request_id)):
        wait_until(lambda: calls["sweep"] >= 5, what="the first pass, then rest")
        yield calls, ran, calls["repair_page"]


def test_a_queue_at_rest_is_swept_and_not_scanned_after_the_first_pass(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    ledger = ended_queue(redis_client, namespace, optimized, 40)
    assert ledger.stats().at_rest
    calls = counted(ledger)
    with running(ledger, lambda job: None):
        wait_until(lambda: calls["sweep"] >= 10, what="ten repair intervals")
    assert calls["repair_page"] == 1  # the first pass: one page holds the 40 records
    assert ledger.stats().completed == 40  # retention keeps them; nothing was touched


def test_a_pending_record_whose_index_entry_was_lost_is_found_and_run(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    # Nothing is PENDING by the indexes, but the records hash holds one more record than
    # they count: a pass starts, rebuilds the entry, and the worker runs the task.
    ledger = ended_queue(redis_client, namespace, optimized, 5)
    with rested(ledger) as (calls, ran, pages):
        assert ledger.admit("lost-entry", "work", 0.5).accepted  # due in half a second
        assert redis_client.zrem(ledger.ready_key, "lost-entry") == 1
        stats = ledger.stats()
        assert (stats.pending, stats.claimed, stats.total) == (0, 0, 6)
        assert not stats.at_rest
        wait_until(lambda: ran == ["lost-entry"], what="the lost record to run")
        wait_until(lambda: ledger.stats().at_rest, what="the queue at rest again")
    assert calls["repair_page"] > pages
    record = ledger.resolve("lost-entry")
    assert record is not None and record.state is State.COMPLETED


def test_work_arriving_ends_the_rest_and_a_pass_quarantines_corrupt_bytes(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    ledger = ended_queue(redis_client, namespace, optimized, 10)
    with rested(ledger) as (calls, ran, pages):
        # Corrupt bytes over an ended record leave every count as it was: still at rest.
        redis_client.hset(ledger.records_key, "done-003", b"\x00 not a record")
        assert ledger.stats().at_rest
        assert ledger.admit("new-work", "work").accepted
        wait_until(lambda: ran == ["new-work"], what="the new task to run")
        wait_until(lambda: ledger.stats().quarantined == 1, what="the corrupt record quarantined")
    assert calls["repair_page"] > pages
    assert ledger.stats().completed == 10  # nine of before and the new one
