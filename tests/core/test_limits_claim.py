"""Flow limits held in the claim: a rate (token bucket) and a concurrency, per queue.

Every test runs on the fused path (the only one with flow limits). Time moves with the test seam ``clock_skew_ms`` (added to
the Redis server clock inside every script), never with a sleep.
"""

from __future__ import annotations

import pytest
import redis

from django_ledger import Ledger, State
from django_ledger.core.limits import Limits, Rate

pytest_plugins = ["tests.support.ledger_fixtures"]


@pytest.fixture
def optimized() -> bool:
    """The fused path: flow limits run there only (a reference ledger refuses them)."""
    return True


def woken(ledger: Ledger, client: redis.Redis) -> bool:
    return bool(client.exists(ledger.runner.keys.wake))


def fill(ledger: Ledger, n: int) -> None:
    ledger.admit_many((f"r{i:03d}", "p") for i in range(n))


def test_no_limits_is_stored_by_default(ledger: Ledger) -> None:
    use = ledger.limits()
    assert use.limits == Limits() and use.source is None and use.slots_taken == 0


def test_a_rate_takes_at_most_the_burst_then_a_token_per_interval(ledger: Ledger) -> None:
    fill(ledger, 40)
    ledger.set_limits(Limits(rate=Rate(5, 1000, 5)))
    first = ledger.claim_many("w", 40)
    assert len(first) == 5
    held = ledger.claim_many("w", 40)
    assert len(held) == 0
    # The worker learns when the next token is due: within one interval (200 ms).
    assert held.due_in_ms is not None and 0 < held.due_in_ms <= 200
    ledger.clock_skew_ms += 1000
    assert len(ledger.claim_many("w", 40)) == 5  # a period refills LIMIT, never past BURST
    ledger.clock_skew_ms += 10_000
    assert len(ledger.claim_many("w", 40)) == 5


def test_claims_within_one_period_are_at_most_limit_plus_burst(ledger: Ledger) -> None:
    fill(ledger, 60)
    ledger.set_limits(Limits(rate=Rate(10, 1000, 4)))
    ledger.clock_skew_ms += 5000  # a full bucket
    start = ledger.clock_skew_ms
    began = ledger.server_time_ms()
    got = 0
    while ledger.clock_skew_ms - start < 1000:  # one period, in 50 ms steps
        got += len(ledger.claim_many("w", 60))
        ledger.clock_skew_ms += 50
    # The server's own clock runs on too (a busy machine): the bucket refills over all of
    # the time that passed on the clock the scripts read, skew and all.
    elapsed = ledger.server_time_ms() - began
    assert 10 <= got <= 4 + elapsed * 10 // 1000 + 1


def test_a_held_task_stays_pending_and_spends_no_attempt(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    fill(ledger, 3)
    ledger.set_limits(Limits(concurrency=1))
    [claim] = ledger.claim_many("w", 3)
    assert len(ledger.claim_many("w", 3)) == 0
    others = [r for r in ledger.resolve_many(["r000", "r001", "r002"]) if r is not None]
    waiting = [r for r in others if r.request_id != claim.request_id]
    assert [r.state for r in waiting] == [State.PENDING, State.PENDING]
    assert [r.attempts for r in waiting] == [0, 0]
    assert [r.fence for r in waiting] == [0, 0]
    assert redis_client.zcard(ledger.leases_key) == 1  # no lease taken either


def test_concurrency_never_has_more_claimed_and_a_settlement_frees_a_slot(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    fill(ledger, 5)
    ledger.set_limits(Limits(concurrency=2))
    claims = ledger.claim_many("w", 5)
    assert len(claims) == 2
    held = ledger.claim_many("w2", 5)
    assert len(held) == 0
    # Every slot taken: nobody is woken, and the answer is to wait for a wake-up.
    assert held.due_in_ms is None and not woken(ledger, redis_client)
    assert ledger.limits().slots_taken == 2
    # A settle-only call (the worker's, with no room) frees a slot and wakes a worker.
    ledger.settle_and_claim([(claims[0], State.COMPLETED)], "w", 0)
    assert woken(ledger, redis_client)
    more = ledger.claim_many("w2", 5)
    assert len(more) == 1
    assert len(ledger.claim_many("w2", 5)) == 0


def test_a_settlement_and_its_claim_share_the_freed_slot(ledger: Ledger) -> None:
    fill(ledger, 5)
    ledger.set_limits(Limits(concurrency=2))
    claims = ledger.claim_many("w", 5)
    _, more = ledger.settle_and_claim([(claims[0], State.COMPLETED)], "w", 5)
    assert len(more) == 1
    assert ledger.limits().slots_taken == 2


def test_a_repaired_expired_lease_frees_its_slot(ledger: Ledger) -> None:
    fill(ledger, 3)
    ledger.set_limits(Limits(concurrency=1))
    ledger.claim_many("w", 3, lease=5)
    assert len(ledger.claim_many("w2", 3)) == 0
    ledger.clock_skew_ms += 6000  # the lease runs out: the slot stays taken until repair
    assert len(ledger.claim_many("w2", 3)) == 0
    ledger.repair()
    assert len(ledger.claim_many("w2", 3)) == 1


def test_a_limited_queue_holds_claims_only_in_the_lower_half_of_its_slots(
    ledger: Ledger,
) -> None:
    fill(ledger, 5)
    ledger.set_limits(Limits(concurrency=4))
    claims = ledger.claim_many("w", 5, hold_after=1)
    assert [c.held for c in claims] == [False, True]  # 2 claimed: half of 4


def test_raising_a_limit_wakes_a_worker_and_lifting_it_claims_all(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    fill(ledger, 4)
    ledger.set_limits(Limits(concurrency=1))
    assert len(ledger.claim_many("w", 4)) == 1
    assert not woken(ledger, redis_client)
    assert ledger.set_limits(Limits(concurrency=3))
    assert woken(ledger, redis_client)
    assert len(ledger.claim_many("w", 4)) == 2
    assert ledger.set_limits(Limits())
    assert len(ledger.claim_many("w", 4)) == 1
    assert not redis_client.exists(ledger.runner.keys.limits)


def test_settings_do_not_overwrite_an_operators_limits(ledger: Ledger) -> None:
    assert ledger.set_limits(Limits(concurrency=2), source="settings", force=False)
    assert not ledger.set_limits(Limits(concurrency=2), source="settings", force=False)
    assert ledger.set_limits(Limits(concurrency=5))
    assert not ledger.set_limits(Limits(concurrency=2), source="settings", force=False)
    use = ledger.limits()
    assert use.limits.concurrency == 5 and use.source == "operator"


def test_a_changed_rate_keeps_its_bucket_clamped_to_the_new_burst(ledger: Ledger) -> None:
    fill(ledger, 20)
    ledger.set_limits(Limits(rate=Rate(1, 60_000, 10)))
    assert len(ledger.claim_many("w", 20)) == 10
    ledger.set_limits(Limits(rate=Rate(1, 60_000, 3)))  # empty stays empty
    assert len(ledger.claim_many("w", 20)) == 0
    use = ledger.limits()
    assert use.tokens_left is not None and use.tokens_left < 1


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_bad_limits_are_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        Limits(concurrency=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        Rate(bad, 1000, 1)  # type: ignore[arg-type]
