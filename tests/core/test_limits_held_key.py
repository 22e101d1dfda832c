"""A RATE's held claims live in the queue's ``held`` key, apart from a KEY's pool
(``keyed``): one meaning per key. Both ledger paths."""

from __future__ import annotations

import pytest
import redis

from django_ledger import Ledger
from django_ledger.core.limits import Limits, Rate

pytest_plugins = ["tests.support.ledger_fixtures"]


@pytest.fixture
def optimized() -> bool:
    """The fused path: flow limits run there only (a reference ledger refuses them)."""
    return True


def test_held_claims_of_a_rate_are_in_the_held_key_only(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    ledger.admit_many((f"r{i:03d}", "p") for i in range(20))
    ledger.set_limits(Limits(rate=Rate(10, 1000, 10)))
    held = [c.request_id for c in ledger.claim_many("w", 8, hold_after=2) if c.held]
    assert held
    stored = redis_client.zrange(ledger.runner.keys.held, 0, -1)
    assert sorted(m.decode() for m in stored) == sorted(f"h{i}" for i in held)
    assert not redis_client.exists(ledger.runner.keys.keyed)


def test_held_entries_an_older_version_left_in_the_pool_go_when_the_limits_are_written(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    ledger.set_limits(Limits(rate=Rate(10, 1000, 10)))
    pool = ledger.runner.keys.keyed
    redis_client.zadd(pool, {"hr001": 0, "hr002": 0})  # as versions before the held key
    ledger.set_limits(Limits(rate=Rate(10, 1000, 10)))  # the same limits, written again
    assert not redis_client.exists(pool)
    assert ledger.limits().tokens_left == 10
