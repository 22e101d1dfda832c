"""Prefetch under flow limits: held claims beyond the threads free, taken only from
headroom (docs/limits.md, "Prefetch from headroom").

Every test runs on the fused path (the only one with flow limits). Time moves with the test seam ``clock_skew_ms``, never
with a sleep.
"""

from __future__ import annotations

import json
import random
import time

import pytest
import redis

from django_ledger import Ledger, State
from django_ledger.core.limits import Limits, Rate
from django_ledger.core.results import SettlementStatus

pytest_plugins = ["tests.support.ledger_fixtures"]


@pytest.fixture
def optimized() -> bool:
    """The fused path: flow limits run there only (a reference ledger refuses them)."""
    return True


BIG = 1_000_000_000


def fill(ledger: Ledger, n: int) -> None:
    ledger.admit_many((f"r{i:03d}", "p") for i in range(n))


def woken(ledger: Ledger, client: redis.Redis) -> bool:
    return bool(client.exists(ledger.runner.keys.wake))


def counted_held(client: redis.Redis, ledger: Ledger) -> int:
    """The held claims the rate counts (the held key's 'h' entries)."""
    return int(client.zlexcount(ledger.runner.keys.held, "[h", "(i"))


def test_limits_that_do_not_bind_prefetch_as_no_limits_do(ledger: Ledger) -> None:
    fill(ledger, 40)
    ledger.set_limits(Limits(Rate(BIG, 1000, BIG), BIG))
    claims = ledger.claim_many("w", 16, hold_after=8)
    assert [c.held for c in claims] == [False] * 8 + [True] * 8
    done = [(c, State.COMPLETED) for c in claims[:8]]
    started = [(c, State.CLAIMED, 30) for c in claims[8:12]]
    _, more = ledger.settle_and_claim(done + started, "w", 12, hold_after=4)
    assert [c.held for c in more] == [False] * 4 + [True] * 8


def test_a_concurrency_that_does_not_bind_prefetches(ledger: Ledger) -> None:
    fill(ledger, 20)
    ledger.set_limits(Limits(concurrency=100))
    claims = ledger.claim_many("w", 10, hold_after=2)
    assert [c.held for c in claims] == [False] * 2 + [True] * 8


def test_held_claims_never_take_the_last_slots(ledger: Ledger, redis_client: redis.Redis) -> None:
    fill(ledger, 20)
    ledger.set_limits(Limits(concurrency=6))
    first = ledger.claim_many("w", 8, hold_after=1)
    assert [c.held for c in first] == [False, True, True]  # 3 claimed: half of 6
    # Another worker with threads free starts in the slots left, up to the limit.
    other = ledger.claim_many("w2", 8, hold_after=8)
    assert len(other) == 3 and not any(c.held for c in other)
    assert ledger.limits().slots_taken == 6
    assert len(ledger.claim_many("w3", 8, hold_after=8)) == 0


def test_past_half_the_slots_a_busy_worker_holds_nothing_and_leaves_the_rest(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    fill(ledger, 20)
    ledger.set_limits(Limits(concurrency=4))
    assert len(ledger.claim_many("w", 2, hold_after=2)) == 2
    # No thread free (hold_after 0), half the slots taken: nothing is held...
    busy = ledger.claim_many("w", 6, hold_after=0)
    assert len(busy) == 0
    # ...the busy worker waits for a thread of its own, not a due time, and the wake key
    # stays for a worker that can start the rest.
    assert busy.due_in_ms is None and woken(ledger, redis_client)
    assert len(ledger.claim_many("w2", 6, hold_after=6)) == 2
    assert ledger.limits().slots_taken == 4


def test_a_rate_at_its_limit_takes_no_held_claims(ledger: Ledger) -> None:
    fill(ledger, 40)
    ledger.set_limits(Limits(rate=Rate(5, 1000, 5)))
    assert len(ledger.claim_many("w", 5, hold_after=5)) == 5  # the bucket is empty
    ledger.clock_skew_ms += 200  # one token
    claims = ledger.claim_many("w", 8, hold_after=1)
    assert [c.held for c in claims] == [False]


def test_a_rate_holds_claims_only_while_half_the_burst_stays(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    fill(ledger, 40)
    ledger.set_limits(Limits(rate=Rate(10, 60_000, 10)))
    claims = ledger.claim_many("w", 10, hold_after=2)
    # 2 start; 3 held leave 5 tokens, half the burst.
    assert [c.held for c in claims] == [False] * 2 + [True] * 3
    assert counted_held(redis_client, ledger) == 3
    assert len(ledger.claim_many("w", 10, hold_after=0)) == 0


def test_held_claims_keep_their_tokens_out_of_the_bucket_until_they_start(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    """A held claim starts later than its token was spent: the bucket refills only to
    BURST less the held claims, so the starts in any PERIOD stay within LIMIT + BURST."""
    fill(ledger, 60)
    ledger.set_limits(Limits(rate=Rate(10, 1000, 10)))
    first = ledger.claim_many("w", 8, hold_after=2)
    held = [c for c in first if c.held]
    assert len(first) == 5 and len(held) == 3
    ledger.clock_skew_ms += 5000  # long enough to refill a whole burst
    assert ledger.limits().tokens_left == 7
    spent = time.monotonic()  # the bucket empties in the next call, refilling at 10 a second
    burst = ledger.claim_many("w2", 30, hold_after=30)
    assert len(burst) == 7  # 7 + the 3 held starting now: the burst, no more
    settled, more = ledger.settle_and_claim([(c, State.CLAIMED, 30) for c in held], "w", 0)
    assert all(s.status is not SettlementStatus.LOST for s in settled) and len(more) == 0
    assert counted_held(redis_client, ledger) == 0
    # Their starts do not refill the bucket at once: it refills at the rate (what the
    # calls' own time refilled, on a slow machine, and no more).
    claimed = len(ledger.claim_many("w2", 30, hold_after=30))
    assert claimed <= int(10 * (time.monotonic() - spent))  # from before the burst to after
    ledger.clock_skew_ms += 1000
    assert len(ledger.claim_many("w2", 30, hold_after=30)) == 10


def test_held_claims_ended_by_another_path_are_checked_and_dropped(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    fill(ledger, 60)
    ledger.set_limits(Limits(rate=Rate(10, 1000, 10)))
    first = ledger.claim_many("w", 8, hold_after=2)
    held = [c for c in first if c.held]
    assert len(held) == 3
    ledger.release(held)  # settle.lua: the entries stay until checked
    assert counted_held(redis_client, ledger) == 3
    ledger.clock_skew_ms += 5000
    # More counted held than claimed: the next claim checks them against the records.
    again = ledger.claim_many("w", 30, hold_after=30)
    assert counted_held(redis_client, ledger) == 0
    assert len(again) == 7  # the bucket as it was: the ceiling comes back at the rate
    ledger.clock_skew_ms += 1000
    assert len(ledger.claim_many("w", 30, hold_after=30)) == 10


def test_a_lost_settlement_keeps_the_held_claim_counted(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    fill(ledger, 10)
    ledger.set_limits(Limits(rate=Rate(10, 1000, 10)))
    held = [c for c in ledger.claim_many("w", 8, hold_after=2, lease=5) if c.held]
    assert len(held) == 3
    ledger.clock_skew_ms += 6000  # the leases run out: settlements are lost
    settled, _ = ledger.settle_and_claim([(c, State.COMPLETED) for c in held], "w", 0)
    assert all(s.status is SettlementStatus.LOST for s in settled)
    assert counted_held(redis_client, ledger) == 3


def test_removing_the_rate_forgets_the_held_claims(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    fill(ledger, 10)
    ledger.set_limits(Limits(rate=Rate(10, 1000, 10)))
    assert len(ledger.claim_many("w", 8, hold_after=2)) == 5
    assert counted_held(redis_client, ledger) == 3
    ledger.set_limits(Limits(concurrency=50))
    assert counted_held(redis_client, ledger) == 0


def test_random_runs_start_at_most_limit_plus_burst_in_any_period(ledger: Ledger) -> None:
    """Claims, held claims started late, and settlements, at random on the test clock:
    the starts (a claim that starts at once, or a held claim when marked started) in any
    period never pass LIMIT + BURST."""
    limit, burst, period = 6, 6, 1000
    fill(ledger, 400)
    ledger.set_limits(Limits(rate=Rate(limit, period, burst)))
    rng = random.Random(24)
    starts: list[int] = []
    held: list = []
    running: list = []
    for _ in range(150):
        ledger.clock_skew_ms += rng.choice([0, 50, 200, 700, 3000])
        now = ledger.runner.server_time_ms()
        if held and rng.random() < 0.4:
            begin = rng.sample(held, rng.randint(1, len(held)))
            for claim in begin:
                held.remove(claim)
            items = [(c, State.CLAIMED, 30) for c in begin]
            items += [(c, State.COMPLETED) for c in running]
            running = list(begin)
            settled, got = ledger.settle_and_claim(
                items, "w", rng.randint(0, 8), hold_after=rng.randint(0, 3)
            )
            assert all(s.status is not SettlementStatus.LOST for s in settled)
            starts += [now] * len(begin)
        else:
            got = ledger.claim_many("w", rng.randint(1, 8), hold_after=rng.randint(0, 3))
        starts += [now for c in got if not c.held]
        running += [c for c in got if not c.held]
        held += [c for c in got if c.held]
    assert sum(1 for _ in starts) > 100
    starts.sort()
    for i, first in enumerate(starts):
        within = sum(1 for t in starts[i:] if t < first + period)
        assert within <= limit + burst, (i, within)


# A queue with a KEY: held claims per key, from the key's own headroom; none under a RATE.

KEY = "kwargs.tenant_id"


def admit_keyed(ledger: Ledger, tenant: str, n: int) -> None:
    ledger.admit_many(
        (f"{tenant}-{i:03d}", json.dumps({"args": [], "kwargs": {"tenant_id": tenant}}))
        for i in range(n)
    )


def test_a_key_alone_prefetches_in_turn(ledger: Ledger) -> None:
    ledger.set_limits(Limits(key=KEY))
    for tenant in ("a", "b", "c", "d"):
        admit_keyed(ledger, tenant, 5)
    claims = ledger.claim_many("w", 8, hold_after=2)
    assert [c.held for c in claims] == [False] * 2 + [True] * 6
    tenants = [json.loads(c.payload)["kwargs"]["tenant_id"] for c in claims]
    assert sorted(tenants[:4]) == ["a", "b", "c", "d"]  # one a key a turn, held or not


def test_a_keys_held_claims_stay_in_the_lower_half_of_its_slots(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    ledger.set_limits(Limits(concurrency=4, key=KEY))
    admit_keyed(ledger, "a", 10)
    first = ledger.claim_many("w", 8, hold_after=1)
    assert [c.held for c in first] == [False, True]  # 2 of a's 4 slots
    busy = ledger.claim_many("w", 8, hold_after=0)
    assert len(busy) == 0 and busy.due_in_ms is None and woken(ledger, redis_client)
    other = ledger.claim_many("w2", 8, hold_after=8)
    assert len(other) == 2 and not any(c.held for c in other)  # a's last slots
    assert len(ledger.claim_many("w3", 8, hold_after=8)) == 0


def test_a_rate_per_key_takes_no_held_claims(ledger: Ledger) -> None:
    ledger.set_limits(Limits(rate=Rate(BIG, 1000, BIG), key=KEY))
    admit_keyed(ledger, "a", 10)
    claims = ledger.claim_many("w", 8, hold_after=3)
    assert [c.held for c in claims] == [False] * 3
