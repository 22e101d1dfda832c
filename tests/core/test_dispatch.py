"""Tests of the dispatch registry: one contract, run on Redis and in memory."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import FrozenInstanceError, dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from django_ledger.core.dispatch import (
    CorruptDispatch,
    Dispatch,
    DispatchRegistry,
    FireTime,
    MemoryDispatchRegistry,
    RedisDispatchRegistry,
)
from django_ledger.core.errors import LedgerError

ROOT = Path(__file__).resolve().parents[2]
FIRE = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)
FIRE_EPOCH = 1704110400
WEEK = 7 * 24 * 60 * 60


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = 1_700_000_000.25) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Engine:
    """A registry under test, with what the engine-neutral tests need of it."""

    registry: DispatchRegistry
    now: Callable[[], float]
    expire_records: Callable[[], None]


#: Seconds a test waits for the server to do what it must (expire a key): generous, so a
#: slow machine passes, and finite, so a regression fails instead of hanging the suite.
WAIT = 30.0


def wait_until(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    """Poll ``condition`` until it holds; fail, saying ``what`` did not happen, at the deadline."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout:.0f} s"
        time.sleep(0.01)


def _expire_redis_records(client: redis.Redis, namespace: str) -> None:
    # Let the server expire every record (not the index), as time would.
    for record_key in client.scan_iter(match=f"{namespace}:cron_dispatch:*"):
        client.pexpire(record_key, 1)
    wait_until(
        lambda: not any(client.scan_iter(match=f"{namespace}:cron_dispatch:*")),
        "the records did not expire",
    )


@pytest.fixture(params=["redis", "memory"])
def engine(request: pytest.FixtureRequest, redis_client: redis.Redis, namespace: str) -> Engine:
    if request.param == "redis":
        return Engine(
            registry=RedisDispatchRegistry(redis_client, namespace=namespace),
            now=time.time,
            expire_records=lambda: _expire_redis_records(redis_client, namespace),
        )
    clock = FakeClock()
    registry = MemoryDispatchRegistry(clock=clock)
    return Engine(
        registry=registry,
        now=clock,
        expire_records=lambda: clock.advance(registry.ttl),
    )


@pytest.fixture
def registry(engine: Engine) -> DispatchRegistry:
    return engine.registry


# -- the record ----------------------------------------------------------------


def test_record_json_has_the_reference_format() -> None:
    record = Dispatch("daily_report", FIRE, FIRE + timedelta(seconds=3), "n-1", "ok")
    assert record.to_json() == (
        '{"key":"daily_report","fire_time":1704110400,"dispatched_at":1704110403,'
        '"node_id":"n-1","status":"ok"}'
    )
    assert Dispatch.from_json(record.to_json()) == record
    assert Dispatch.from_json(record.to_json().encode()) == record


def test_record_is_frozen_with_slots() -> None:
    record = Dispatch("k", FIRE, FIRE, "n", "dispatched")
    with pytest.raises(FrozenInstanceError):
        record.status = "failed"  # type: ignore[misc]
    assert not hasattr(record, "__dict__")


def test_record_refuses_times_that_are_not_aware_utc() -> None:
    with pytest.raises(ValueError, match="aware UTC"):
        Dispatch("k", FIRE.replace(tzinfo=None), FIRE, "n", "dispatched")
    with pytest.raises(ValueError, match="aware UTC"):
        Dispatch("k", FIRE, FIRE.astimezone(timezone(timedelta(hours=2))), "n", "s")
    with pytest.raises(TypeError):
        Dispatch("k", FIRE_EPOCH, FIRE, "n", "dispatched")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "raw",
    [
        b"not json",
        b"\xff\xfe",
        b"[1, 2]",
        b'{"key": "k", "fire_time": 1, "dispatched_at": 1, "node_id": "n"}',
        b'{"key": 1, "fire_time": 1, "dispatched_at": 1, "node_id": "n", "status": "s"}',
        b'{"key":"k","fire_time":"1","dispatched_at":1,"node_id":"n","status":"s"}',
        b'{"key":"k","fire_time":1.5,"dispatched_at":1,"node_id":"n","status":"s"}',
        b'{"key":"k","fire_time":true,"dispatched_at":1,"node_id":"n","status":"s"}',
        b'{"key":"k","fire_time":1,"dispatched_at":1e400,"node_id":"n","status":"s"}',
        b'{"key":"k","fire_time":10000000000000,"dispatched_at":1,"node_id":"n","status":"s"}',
    ],
)
def test_record_from_json_refuses_what_is_not_a_record(raw: bytes) -> None:
    with pytest.raises(CorruptDispatch):
        Dispatch.from_json(raw)


def test_corrupt_dispatch_is_a_ledger_error_and_a_value_error() -> None:
    assert issubclass(CorruptDispatch, LedgerError)
    assert issubclass(CorruptDispatch, ValueError)


# -- the contract, on both engines ---------------------------------------------


def test_find_of_an_unknown_fire_is_none(registry: DispatchRegistry) -> None:
    assert registry.find_dispatch("daily_report", FIRE) is None
    assert registry.is_dispatched("daily_report", FIRE) is False


def test_log_returns_the_record_with_aware_utc_times(engine: Engine) -> None:
    before = math.floor(engine.now())
    record = engine.registry.log_dispatch("daily_report", FIRE, "node-1")
    after = math.floor(engine.now())
    assert isinstance(record, Dispatch)
    assert record.key == "daily_report"
    assert record.node_id == "node-1"
    assert record.status == "dispatched"
    assert record.fire_time == FIRE
    for moment in (record.fire_time, record.dispatched_at):
        assert moment.tzinfo is UTC
        assert moment.microsecond == 0
    assert before <= record.dispatched_at.timestamp() <= after


def test_log_then_find_round_trips(registry: DispatchRegistry) -> None:
    logged = registry.log_dispatch("daily_report", FIRE, "node-1", "failed")
    found = registry.find_dispatch("daily_report", FIRE)
    assert found == logged
    assert found is not None
    assert found.status == "failed"
    assert found.fire_time.tzinfo is UTC
    assert found.dispatched_at.tzinfo is UTC
    assert registry.is_dispatched("daily_report", FIRE) is True


def test_log_overwrites_the_record_of_the_same_fire(registry: DispatchRegistry) -> None:
    registry.log_dispatch("daily_report", FIRE, "node-1", "failed")
    registry.log_dispatch("daily_report", FIRE, "node-2")
    found = registry.find_dispatch("daily_report", FIRE)
    assert found is not None
    assert (found.node_id, found.status) == ("node-2", "dispatched")


@pytest.mark.parametrize(
    "same_fire",
    [
        FIRE,
        FIRE + timedelta(microseconds=999_999),
        FIRE.astimezone(timezone(timedelta(hours=-5))),
        FIRE_EPOCH,
        FIRE_EPOCH + 0.75,
        float(FIRE_EPOCH),
    ],
)
def test_every_form_of_a_fire_time_names_the_same_fire(
    registry: DispatchRegistry, same_fire: FireTime
) -> None:
    registry.log_dispatch("daily_report", FIRE, "node-1")
    found = registry.find_dispatch("daily_report", same_fire)
    assert found is not None
    assert found.fire_time == FIRE


def test_fire_times_before_the_epoch_floor_to_the_second(
    registry: DispatchRegistry,
) -> None:
    record = registry.log_dispatch("old", -1.5, "node-1")
    assert record.fire_time == datetime(1969, 12, 31, 23, 59, 58, tzinfo=UTC)
    assert registry.find_dispatch("old", -2) == record


def test_claim_is_won_once_and_records_the_winner(registry: DispatchRegistry) -> None:
    assert registry.claim_dispatch("daily_report", FIRE, "node-1") is True
    assert registry.claim_dispatch("daily_report", FIRE, "node-2") is False
    assert registry.claim_dispatch("daily_report", FIRE, "node-1") is False
    found = registry.find_dispatch("daily_report", FIRE)
    assert found is not None
    assert (found.node_id, found.status) == ("node-1", "dispatched")
    assert registry.is_dispatched("daily_report", FIRE)


def test_claim_loses_to_a_logged_record(registry: DispatchRegistry) -> None:
    registry.log_dispatch("daily_report", FIRE, "node-1", "failed")
    assert registry.claim_dispatch("daily_report", FIRE, "node-2") is False
    found = registry.find_dispatch("daily_report", FIRE)
    assert found is not None
    assert (found.node_id, found.status) == ("node-1", "failed")


def test_other_fires_and_keys_are_independent(registry: DispatchRegistry) -> None:
    assert registry.claim_dispatch("daily_report", FIRE, "node-1")
    assert registry.claim_dispatch("daily_report", FIRE + timedelta(minutes=1), "n-2")
    assert registry.claim_dispatch("hourly_report", FIRE, "node-3")
    assert registry.find_dispatch("daily_report", FIRE + timedelta(seconds=1)) is None


def test_concurrent_claims_in_threads_have_one_winner(
    registry: DispatchRegistry,
) -> None:
    contenders = 16
    barrier = threading.Barrier(contenders)
    results: dict[str, bool] = {}

    def contend(node_id: str) -> None:
        barrier.wait(timeout=10)
        results[node_id] = registry.claim_dispatch("daily_report", FIRE, node_id)

    threads = [threading.Thread(target=contend, args=(f"node-{i}",)) for i in range(contenders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    winners = [node for node, won in results.items() if won]
    assert len(results) == contenders
    assert len(winners) == 1
    found = registry.find_dispatch("daily_report", FIRE)
    assert found is not None
    assert found.node_id == winners[0]


def test_history_is_newest_fire_first(registry: DispatchRegistry) -> None:
    for minute in (3, 0, 4, 1, 2):
        registry.log_dispatch("daily_report", FIRE + timedelta(minutes=minute), "n")
    registry.log_dispatch("other", FIRE + timedelta(minutes=9), "n")
    history = registry.history("daily_report")
    assert [d.fire_time for d in history] == [FIRE + timedelta(minutes=m) for m in (4, 3, 2, 1, 0)]
    assert {d.key for d in history} == {"daily_report"}
    assert registry.history("daily_report", limit=2) == history[:2]


def test_history_includes_claims(registry: DispatchRegistry) -> None:
    registry.claim_dispatch("daily_report", FIRE, "node-1")
    registry.claim_dispatch("daily_report", FIRE, "node-2")
    registry.log_dispatch("daily_report", FIRE + timedelta(minutes=1), "node-3")
    assert [d.node_id for d in registry.history("daily_report")] == [
        "node-3",
        "node-1",
    ]


def test_history_of_an_unknown_key_is_empty(registry: DispatchRegistry) -> None:
    assert registry.history("never") == []


def test_history_is_bounded(registry: DispatchRegistry) -> None:
    bound = registry.HISTORY_BOUND
    for i in range(bound + 5):
        registry.log_dispatch("every_second", FIRE_EPOCH + i, "n")
    assert len(registry.history("every_second")) == 50
    history = registry.history("every_second", limit=bound)
    assert len(history) == bound
    assert history[0].fire_time == FIRE + timedelta(seconds=bound + 4)
    assert history[-1].fire_time == FIRE + timedelta(seconds=5)


def test_expired_records_leave_history_and_find(engine: Engine) -> None:
    registry = engine.registry
    registry.log_dispatch("daily_report", FIRE, "node-1")
    registry.log_dispatch("daily_report", FIRE + timedelta(minutes=1), "node-1")
    engine.expire_records()
    assert registry.find_dispatch("daily_report", FIRE) is None
    assert not registry.is_dispatched("daily_report", FIRE)
    assert registry.history("daily_report") == []
    later = registry.log_dispatch("daily_report", FIRE - timedelta(minutes=1), "n-2")
    assert registry.history("daily_report") == [later]
    assert registry.claim_dispatch("daily_report", FIRE, "node-3") is True


NAIVE = datetime(2024, 1, 1, 12, 0)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda r: r.log_dispatch("k", NAIVE, "n"), ValueError, "naive"),
        (lambda r: r.find_dispatch("k", NAIVE), ValueError, "naive"),
        (lambda r: r.claim_dispatch("k", NAIVE, "n"), ValueError, "naive"),
        (lambda r: r.is_dispatched("k", NAIVE), ValueError, "naive"),
        (lambda r: r.log_dispatch("", FIRE, "n"), ValueError, "key"),
        (lambda r: r.log_dispatch(" \t", FIRE, "n"), ValueError, "key"),
        (lambda r: r.find_dispatch("", FIRE), ValueError, "key"),
        (lambda r: r.claim_dispatch("", FIRE, "n"), ValueError, "key"),
        (lambda r: r.history(""), ValueError, "key"),
        (lambda r: r.log_dispatch("\ud800", FIRE, "n"), ValueError, "surrogate"),
        (lambda r: r.log_dispatch(b"k", FIRE, "n"), TypeError, "key"),
        (lambda r: r.find_dispatch(None, FIRE), TypeError, "key"),
        (lambda r: r.history(7), TypeError, "key"),
        (lambda r: r.log_dispatch("k", FIRE, ""), ValueError, "node_id"),
        (lambda r: r.claim_dispatch("k", FIRE, ""), ValueError, "node_id"),
        (lambda r: r.claim_dispatch("k", FIRE, None), TypeError, "node_id"),
        (lambda r: r.log_dispatch("k", FIRE, "n", ""), ValueError, "status"),
        (lambda r: r.log_dispatch("k", FIRE, "n", 1), TypeError, "status"),
        (lambda r: r.log_dispatch("k", "2024-01-01", "n"), TypeError, "fire_time"),
        (lambda r: r.log_dispatch("k", FIRE.date(), "n"), TypeError, "fire_time"),
        (lambda r: r.find_dispatch("k", True), TypeError, "fire_time"),
        (lambda r: r.find_dispatch("k", None), TypeError, "fire_time"),
        (lambda r: r.find_dispatch("k", math.nan), ValueError, "finite"),
        (lambda r: r.find_dispatch("k", math.inf), ValueError, "finite"),
        (lambda r: r.find_dispatch("k", 10**20), ValueError, "range"),
        (lambda r: r.history("k", 0), ValueError, "limit"),
        (lambda r: r.history("k", r.HISTORY_BOUND + 1), ValueError, "limit"),
        (lambda r: r.history("k", 2.0), TypeError, "limit"),
        (lambda r: r.history("k", True), TypeError, "limit"),
    ],
)
def test_bad_input_is_refused_clearly(
    registry: DispatchRegistry,
    call: Callable[[Any], object],
    error: type[Exception],
    message: str,
) -> None:
    with pytest.raises(error, match=message):
        call(registry)
    assert registry.history("k") == []


@pytest.mark.parametrize(
    ("ttl", "error"),
    [(0, ValueError), (-5, ValueError), (1.5, TypeError), (True, TypeError)],
)
def test_a_bad_ttl_is_refused(redis_client: redis.Redis, ttl: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="ttl"):
        RedisDispatchRegistry(redis_client, ttl=ttl)
    with pytest.raises(error, match="ttl"):
        MemoryDispatchRegistry(ttl=ttl)


# Keys as cron job names come: any text without whitespace or control characters.
KEYS = st.text(
    st.characters(exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")),
    min_size=1,
    max_size=40,
)
OFFSETS = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))]
)
FIRE_TIMES = st.one_of(
    st.datetimes(
        min_value=datetime(1900, 1, 1),
        max_value=datetime(2200, 1, 1),
        timezones=OFFSETS,
    ),
    st.integers(min_value=-(2**31), max_value=2**33),
    st.floats(min_value=-(2**31), max_value=2**33, allow_nan=False),
)


def _epoch_seconds(fire_time: FireTime) -> int:
    if isinstance(fire_time, datetime):
        return int(fire_time.replace(microsecond=0).timestamp())
    return math.floor(fire_time)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=KEYS, fire_time=FIRE_TIMES, node_id=KEYS)
def test_log_then_find_round_trips_any_key_and_fire_time(
    registry: DispatchRegistry, key: str, fire_time: FireTime, node_id: str
) -> None:
    logged = registry.log_dispatch(key, fire_time, node_id)
    assert logged.fire_time.timestamp() == _epoch_seconds(fire_time)
    assert registry.find_dispatch(key, fire_time) == logged
    assert registry.find_dispatch(key, logged.fire_time) == logged
