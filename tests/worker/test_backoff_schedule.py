"""``Backoff``'s schedule as a property, and a raw ``HANDLER``'s retry delayed by it.

The ceiling of the n-th retry is ``min(cap, base * 2**(n - 1))``: the first at most
``base``, each next one double, never past ``cap``; a retry waits a uniform draw from
0 to it. The worker test reads the delay off the record (its due time against the
settlement's time, both on the Redis server's clock), so a delay of 0 fails it.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from django_ledger import Ledger, State
from django_ledger.core.worker.handler import Backoff
from tests.support.redis_server import RedisServer
from tests.support.worker_variants import VariantWorker

bases = st.floats(min_value=0.001, max_value=1_000.0, allow_nan=False)
factors = st.floats(min_value=1.0, max_value=10_000.0, allow_nan=False)
attempts = st.integers(min_value=1, max_value=80)


@given(base=bases, factor=factors)
def test_the_first_retry_waits_at_most_base(base: float, factor: float) -> None:
    backoff = Backoff(base=base, cap=base * factor)
    assert backoff.ceiling(1) == base
    assert 0 <= backoff.delay(1, random.Random(0)) <= base


@given(base=bases, factor=factors, attempt=attempts)
def test_each_ceiling_doubles_the_last_up_to_the_cap(
    base: float, factor: float, attempt: int
) -> None:
    backoff = Backoff(base=base, cap=base * factor)
    ceiling, following = backoff.ceiling(attempt), backoff.ceiling(attempt + 1)
    assert following == min(backoff.cap, 2 * ceiling)
    assert ceiling <= following <= backoff.cap
    if attempt <= 60:  # the exponent stops growing there (floats would overflow)
        assert ceiling == min(backoff.cap, base * 2 ** (attempt - 1))


@given(base=bases, factor=factors, attempt=attempts, seed=st.integers(0, 2**32))
def test_a_delay_is_drawn_from_zero_to_the_ceiling(
    base: float, factor: float, attempt: int, seed: int
) -> None:
    backoff = Backoff(base=base, cap=base * factor)
    assert 0 <= backoff.delay(attempt, random.Random(seed)) <= backoff.ceiling(attempt)


@given(base=bases, factor=factors)
def test_the_ceiling_reaches_the_cap_and_stays(base: float, factor: float) -> None:
    backoff = Backoff(base=base, cap=base * factor)
    assert backoff.ceiling(80) == backoff.cap == backoff.ceiling(200)


def test_full_jitter_spreads_over_the_whole_ceiling() -> None:
    backoff, rng = Backoff(base=4.0, cap=100.0), random.Random(7)
    draws = [backoff.delay(3, rng) for _ in range(2_000)]  # ceiling 16 s
    assert max(draws) > 15 and min(draws) < 1


# -- through a real worker ----------------------------------------------------------------


@pytest.fixture
def server(request: pytest.FixtureRequest) -> RedisServer:
    from tests.support.redis_plugin import session_server

    return session_server(request.config)


def test_a_raw_handlers_retry_is_due_after_its_backoff(
    server: RedisServer, redis_client: redis.Redis, namespace: str, tmp_path: Path
) -> None:
    """``BACKOFF_BASE`` = ``BACKOFF_CAP`` = 60 s: the first retry waits from 0 to 60 s."""
    ledger = Ledger(redis_client, namespace, "raw_backoff")
    ids = [f"bad-{n}" for n in range(3)]
    for request_id in ids:
        assert ledger.admit(request_id, "work").accepted
    worker = VariantWorker(
        server.url,
        namespace,
        ["raw_backoff", "--burst", "--concurrency", "3"],
        tmp_path / "worker.log",
        settings="tests.support.tasks_app.escape_settings",
    )
    try:
        assert worker.wait(60) == 0, worker.output()  # nothing due: the retries wait
    finally:
        worker.stop()
    delays = []
    for request_id in ids:
        record = ledger.resolve(request_id)
        assert record is not None and (record.state, record.attempts) == (State.PENDING, 1)
        delays.append(record.due_at - record.updated_at)  # ms, both on the server clock
    assert all(0 < delay <= 60_000 for delay in delays), delays
    assert max(delays) >= 1_000, delays  # three draws all under 1 s: about 1 in 200,000
    assert worker.output().count("outcome=retry queue=raw_backoff") == 3
