"""What the dispatch registry's tests share: fixed fire times, a clock moved by hand, a wait,
and ``Engine`` (a registry under test with its clock and its way to expire records)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import redis

from django_ledger.core.dispatch import DispatchRegistry

ROOT = Path(__file__).resolve().parents[1]
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


def expire_redis_records(client: redis.Redis, namespace: str) -> None:
    # Let the server expire every record (not the index), as time would.
    for record_key in client.scan_iter(match=f"{namespace}:cron_dispatch:*"):
        client.pexpire(record_key, 1)
    wait_until(
        lambda: not any(client.scan_iter(match=f"{namespace}:cron_dispatch:*")),
        "the records did not expire",
    )
