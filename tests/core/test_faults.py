"""Faults the ledger must hide or survive: a lost function library, Redis dying mid-run."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any, TypeVar

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_ledger import (
    AdmissionStatus,
    Ledger,
    LedgerUnavailable,
    SettlementStatus,
    State,
)
from tests.support.redis_server import RedisServer

T = TypeVar("T")
MODES = [pytest.param(True, id="optimized"), pytest.param(False, id="reference")]


@pytest.fixture(params=MODES)
def optimized(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


# -- the function library ----------------------------------------------------------------


def test_function_flush_before_every_call_is_invisible(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    ledger = Ledger(redis_client, namespace, "q", optimized=optimized)
    flush = redis_client.function_flush

    flush()
    assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
    flush()
    statuses = [a.status for a in ledger.admit_many([("b", "p"), ("c", "p"), ("a", "p")])]
    assert statuses == [AdmissionStatus.ADMITTED] * 2 + [AdmissionStatus.DUPLICATE]
    flush()
    first = ledger.claim("w", lease=60)
    assert first is not None
    flush()
    rest = ledger.claim_many("w", 5, lease=60)
    assert len(rest) == 2
    flush()
    assert ledger.renew(first, lease=120).status is SettlementStatus.RENEWED
    flush()
    assert ledger.settle(first).status is SettlementStatus.SETTLED
    flush()
    settled = ledger.settle_many([(claim, State.FAILED) for claim in rest])
    assert [s.status for s in settled] == [SettlementStatus.SETTLED] * 2
    flush()
    assert ledger.stats().completed == 1
    flush()
    assert ledger.repair_page("0", 100).scanned == 3
    flush()
    ledger.close_gate()
    flush()
    imported = ledger.import_record("d", "p", State.PENDING, 0)
    assert imported.status is AdmissionStatus.ADMITTED
    flush()
    assert ledger.claim("w") is None  # the gate is closed
    ledger.open_gate()
    flush()
    claim = ledger.claim("w")
    assert claim is not None and claim.request_id == "d"


class FlushBeforeLoad(redis.Redis):
    """A client whose functions are flushed again as it opens the connection that loads them.

    The worst moment for a flush: after the client saw ``Function not found``, before
    its load and its call. They go as one transaction, so the flush comes before both.
    """

    flushes = 0

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        self.function_flush()
        self.flushes += 1
        return super().pipeline(transaction, shard_hint)


@pytest.mark.standalone_only(reason="a Redis subclass on the standalone URL flushes one server")
def test_function_flush_right_before_a_reload_is_invisible(
    redis_server: RedisServer, redis_client: redis.Redis, namespace: str, optimized: bool
) -> None:
    client = FlushBeforeLoad.from_url(redis_server.url)
    try:
        ledger = Ledger(client, namespace, "q", optimized=optimized)
        redis_client.function_flush()
        assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
        assert client.flushes >= 1  # the flush came, and did not reach the caller
    finally:
        client.close()


@pytest.fixture
def flushing(redis_server: RedisServer) -> Iterator[list[int]]:
    """Flush the server's functions over and over from another thread until the test ends."""
    stop = threading.Event()
    flushes = [0]

    def flush() -> None:
        client = redis_server.client()
        try:
            while not stop.is_set():
                client.function_flush()
                flushes[0] += 1
        finally:
            client.close()

    thread = threading.Thread(target=flush, daemon=True)
    thread.start()
    try:
        yield flushes
    finally:
        stop.set()
        thread.join(10)


@pytest.mark.standalone_only(reason="flushes the functions of one server")
def test_function_flush_mid_run_is_invisible(
    redis_client: redis.Redis, namespace: str, optimized: bool, flushing: list[int]
) -> None:
    ledger = Ledger(redis_client, namespace, "q", optimized=optimized)
    failures: list[str] = []

    def call(operation: Callable[[], T]) -> T | None:
        try:
            return operation()
        except Exception as error:
            failures.append(repr(error))
            return None

    for i in range(60):
        call(lambda i=i: ledger.admit(f"job-{i}", "p"))
        claim = call(lambda: ledger.claim("w", lease=60))
        if claim is not None:
            call(lambda claim=claim: ledger.settle(claim))
    assert flushing[0] > 0
    assert failures == []


# -- Redis restarting -----------------------------------------------------------------


def quick_client(server: RedisServer) -> redis.Redis:
    """A client that gives up at once while Redis is down (one retry, no backoff)."""
    return redis.Redis.from_url(server.url, retry=Retry(NoBackoff(), 1), socket_timeout=5)


def first_call_after_restart(call: Callable[[], T]) -> T:
    """Make ``call``; one LedgerUnavailable (a connection from before the restart) is allowed."""
    try:
        return call()
    except LedgerUnavailable:
        return call()


def test_redis_killed_and_restarted_loses_nothing_acknowledged(
    fresh_redis: RedisServer, optimized: bool
) -> None:
    client = fresh_redis.client()
    ledger = Ledger(client, "faults", "q", optimized=optimized)
    ids = [f"job-{i:03d}" for i in range(100)]
    admitted = ledger.admit_many([(request_id, f"payload {request_id}") for request_id in ids])
    assert all(a.status is AdmissionStatus.ADMITTED for a in admitted)
    claims = ledger.claim_many("w", 30, lease=timedelta(minutes=10))
    assert len(claims) == 30
    completed, failed, held = claims[:10], claims[10:20], claims[20:]
    ledger.settle_many(
        [(c, State.COMPLETED) for c in completed] + [(c, State.FAILED) for c in failed]
    )
    ledger.close_gate()
    ledger.import_record("imported", "p", State.PENDING, 0)
    ledger.open_gate()

    fresh_redis.kill()  # SIGKILL: nothing flushed at exit
    fresh_redis.restart()

    # The next call works (the client reconnects; the library came back with the AOF).
    stats = first_call_after_restart(ledger.stats)
    assert (stats.pending, stats.claimed, stats.completed, stats.failed) == (71, 10, 10, 10)
    assert stats.total == 101
    records = {r.request_id: r for r in ledger.resolve_many([*ids, "imported"]) if r is not None}
    assert len(records) == 101
    assert all(records[c.request_id].state is State.COMPLETED for c in completed)
    assert all(records[c.request_id].state is State.FAILED for c in failed)
    for claim in held:
        record = records[claim.request_id]
        assert (record.state, record.owner, record.fence) == (State.CLAIMED, "w", claim.fence)
    # The claims held across the restart are still good, and the queue goes on.
    assert ledger.renew(held[0]).status is SettlementStatus.RENEWED
    settled = ledger.settle_many([(c, State.COMPLETED) for c in held])
    assert {s.status for s in settled} == {SettlementStatus.SETTLED}
    assert ledger.admit(ids[0], f"payload {ids[0]}").status is AdmissionStatus.DUPLICATE
    assert len(ledger.claim_many("w", 100)) == 71
    client.close()


def test_redis_down_is_ledger_unavailable_then_the_next_call_works(
    fresh_redis: RedisServer, optimized: bool
) -> None:
    client = quick_client(fresh_redis)
    ledger = Ledger(client, "faults", "q", optimized=optimized)
    assert ledger.admit("before", "p").status is AdmissionStatus.ADMITTED
    fresh_redis.kill()
    operations: list[Callable[[], object]] = [
        lambda: ledger.admit("during", "p"),
        lambda: ledger.claim("w"),
        lambda: ledger.resolve("before"),
        ledger.stats,
        lambda: ledger.repair("0"),
        lambda: ledger.gate_closed,
    ]
    for operation in operations:
        with pytest.raises(LedgerUnavailable) as caught:
            operation()
        assert isinstance(caught.value.__cause__, redis.ConnectionError)
    fresh_redis.restart()
    admission = first_call_after_restart(lambda: ledger.admit("after", "p"))
    assert admission.status is AdmissionStatus.ADMITTED
    assert ledger.admit("before", "p").status is AdmissionStatus.DUPLICATE
    assert ledger.resolve("during") is None
    client.close()


def test_a_stream_of_admissions_across_a_crash_loses_nothing_acknowledged(
    fresh_redis: RedisServer, optimized: bool
) -> None:
    client = quick_client(fresh_redis)
    ledger = Ledger(client, "faults", "q", optimized=optimized)
    acknowledged: list[str] = []
    unknown: list[str] = []
    stop = threading.Event()
    crashed = threading.Event()
    errors: list[BaseException] = []

    def admit_forever() -> None:
        try:
            n = 0
            while not stop.is_set():
                request_id = f"job-{n:05d}"
                n += 1
                try:
                    admission = ledger.admit(request_id, "p")
                except LedgerUnavailable:
                    unknown.append(request_id)  # may or may not be stored
                    crashed.set()
                    continue
                # DUPLICATE: a retry of a call whose first run Redis had stored.
                assert admission.accepted
                acknowledged.append(request_id)
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=admit_forever, daemon=True)
    thread.start()
    try:
        wait_for(lambda: len(acknowledged) >= 50)
        fresh_redis.kill()
        wait_for(crashed.is_set)
        fresh_redis.restart()
        after_restart = len(acknowledged)
        wait_for(lambda: len(acknowledged) >= after_restart + 50)
    finally:
        stop.set()
        thread.join(30)
    assert errors == []
    assert unknown, "no call saw Redis down"

    records = ledger.resolve_many(acknowledged)
    missing = [i for i, r in zip(acknowledged, records, strict=True) if r is None]
    assert missing == []
    # Calling again with the ids whose outcome was unknown reconciles them.
    again = ledger.admit_many([(request_id, "p") for request_id in unknown])
    assert {a.status for a in again} <= {AdmissionStatus.ADMITTED, AdmissionStatus.DUPLICATE}
    assert ledger.stats().total == len(acknowledged) + len(unknown)
    client.close()


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {condition}")
        time.sleep(0.005)
