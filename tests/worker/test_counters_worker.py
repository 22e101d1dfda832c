"""The counters a real ``ledger_worker`` process keeps equal the ledger's own outcomes."""

from __future__ import annotations

import signal
from pathlib import Path

import redis

from django_ledger import Ledger, State
from django_ledger.core.counters import Counters
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess, wait_until


def test_the_counters_match_the_tasks_run(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    raw, failing = (
        Ledger(redis_client, namespace, "raw"),
        Ledger(redis_client, namespace, "failing"),
    )
    before = Counters(redis_client, namespace)
    assert before.read("raw").total.runs == 0
    for n in range(30):
        raw.admit(f"ok-{n}", "work")
    for n in range(4):
        failing.admit(f"bad-{n}", "work")  # three attempts each (MAX_ATTEMPTS 3), then FAILED
    worker = WorkerProcess(
        redis_server.url, namespace, ["raw", "failing", "--concurrency", "4"], tmp_path / "w.log"
    )
    try:
        wait_until(
            lambda: raw.stats().completed == 30 and failing.stats().failed == 4,
            what="every record ended",
        )
        worker.signal(signal.SIGTERM)  # a clean stop flushes what the last beat left
        assert worker.wait() == 0, worker.output()
    finally:
        worker.stop()

    attempts = sum(r.attempts for r in failing.resolve_many(f"bad-{n}" for n in range(4)) if r)
    counters = Counters(redis_client, namespace)
    ok, bad = counters.read("raw", "hour").total, counters.read("failing", "hour").total
    assert ok.counts == {"completed": 30, "failed": 0, "retry": 0, "lost": 0, "dead": 0}
    assert bad.counts == {
        "completed": 0,
        "failed": 4,
        "retry": attempts - 4,
        "lost": 0,
        "dead": 0,
    }
    assert attempts == 12
    # Every attempt has a run time; every ended one a wait time.
    assert sum(ok.run) == 30 and sum(ok.wait) == 30
    assert sum(bad.run) == 12 and sum(bad.wait) == 4
    # A raw handler's job counts under the handler's name, as its log line says.
    assert list(counters.read("raw", "day").tasks()) == ["record"]
    assert counters.read("raw", "day").total.counts["completed"] == 30


def test_a_killed_worker_loses_at_most_its_unflushed_batch(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    raw = Ledger(redis_client, namespace, "raw")
    counters = Counters(redis_client, namespace)

    def completed() -> int:
        return counters.read("raw").total.counts["completed"]

    for n in range(20):
        raw.admit(f"a-{n}", "work")
    first = WorkerProcess(redis_server.url, namespace, ["raw"], tmp_path / "a.log")
    try:
        # The beats flush while the worker runs: no stop needed to see the counts.
        wait_until(lambda: completed() == 20, what="the first worker's counts flushed")
        first.signal(signal.SIGKILL)
        first.wait()
    finally:
        first.stop()
    for n in range(10):
        raw.admit(f"b-{n}", "work")
    second = WorkerProcess(redis_server.url, namespace, ["raw"], tmp_path / "b.log")
    try:
        wait_until(lambda: raw.stats().completed == 30, what="the second worker's runs")
        second.signal(signal.SIGKILL)  # its last beat's batch may be in hand: lost, never doubled
        second.wait()
    finally:
        second.stop()
    assert 20 <= completed() <= raw.stats().completed == 30


def test_a_record_the_workers_repairer_ends_dead_is_counted_dead(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    failing = Ledger(redis_client, namespace, "failing", max_attempts=3)  # as the worker's
    failing.admit("orphan", "work")
    for attempt in range(3):  # three owners die in turn: the third expiry spends the last
        claim = failing.claim(f"dead-worker-{attempt}", lease=0.05)
        assert claim is not None
        wait_until(lambda: failing.stats().expired_leases == 1, what="the lease to expire")
        if attempt < 2:
            assert failing.sweep().expired == 1
    worker = WorkerProcess(redis_server.url, namespace, ["failing", "--burst"], tmp_path / "w.log")
    try:
        assert worker.wait() == 0, worker.output()
    finally:
        worker.stop()
    record = failing.resolve("orphan")
    assert record is not None and record.state is State.DEAD
    total = Counters(redis_client, namespace).read("failing", "hour").total
    assert total.counts["dead"] == 1
