"""Limits per key of the task's arguments (KEY) and fair share among keys, in the claim.

Every test runs on the fused path (the only one with flow limits). Time moves with the test seam ``clock_skew_ms``, never
with a sleep.
"""

from __future__ import annotations

import json

import pytest
import redis

from django_ledger import Claim, Ledger, State
from django_ledger.core.limits import Limits, Rate, key_of

pytest_plugins = ["tests.support.ledger_fixtures"]


@pytest.fixture
def optimized() -> bool:
    """The fused path: flow limits run there only (a reference ledger refuses them)."""
    return True


def payload(tenant: object, n: int = 0) -> str:
    return json.dumps({"args": [n], "kwargs": {"tenant_id": tenant}, "task": "t", "v": 1})


def admit(ledger: Ledger, tenant: object, n: int, prefix: str | None = None) -> None:
    prefix = prefix or str(tenant)
    answers = ledger.admit_many((f"{prefix}-{i:05d}", payload(tenant, i)) for i in range(n))
    assert all(a.status.name == "ADMITTED" for a in answers)


def tenant_of(claim_payload: str) -> object:
    return json.loads(claim_payload)["kwargs"]["tenant_id"]


def test_key_of_reads_a_dotted_path_of_the_payload() -> None:
    assert key_of("kwargs.tenant_id", payload("acme")) == "acme"
    assert key_of("kwargs.tenant_id", payload(7)) == "7"
    assert key_of("args.0", payload("x", 3)) == "3"
    assert key_of("kwargs.missing", payload("x")) == ""
    assert key_of("kwargs.tenant_id", "not json") == ""
    assert key_of("kwargs.tenant_id", payload("a\x00b")) is None  # a control character
    assert key_of("kwargs.tenant_id", payload("x" * 300)) is None  # too long
    with pytest.raises(ValueError, match="dotted path"):
        Limits(key="kwargs..tenant")


def test_a_request_whose_key_cannot_be_one_is_rejected(ledger: Ledger) -> None:
    ledger.set_limits(Limits(concurrency=1, key="kwargs.tenant_id"))
    answer = ledger.admit("bad", payload("a\nb"))
    assert answer.status.name == "REJECTED" and answer.reason == "limit_key_invalid"
    assert ledger.resolve("bad") is None  # nothing half-written


def test_concurrency_holds_per_key(ledger: Ledger) -> None:
    ledger.set_limits(Limits(concurrency=2, key="kwargs.tenant_id"))
    admit(ledger, "a", 10)
    admit(ledger, "b", 10)
    claims = ledger.claim_many("w", 20)
    assert sorted(tenant_of(c.payload) for c in claims) == ["a", "a", "b", "b"]
    # Every slot of both keys is taken: nothing more, and no time to come back (-1: a
    # settlement wakes a worker).
    again = ledger.claim_many("w", 20)
    assert len(again) == 0 and again.due_in_ms is None
    # A settlement frees a slot of its key only.
    a_claim = next(c for c in claims if tenant_of(c.payload) == "a")
    ledger.settle(a_claim, State.COMPLETED)
    more = ledger.claim_many("w", 20)
    assert [tenant_of(c.payload) for c in more] == ["a"]
    # A record waiting on its key's limit spent no attempt and holds no lease.
    waiting = [r for r in ledger.resolve_many([f"a-{i:05d}" for i in range(10)]) if r]
    pending = [r for r in waiting if r.state is State.PENDING]
    assert len(pending) == 7 and all(r.attempts == 0 and r.lease_until is None for r in pending)


def test_rate_holds_per_key(ledger: Ledger) -> None:
    ledger.set_limits(Limits(rate=Rate(3, 1000, 3), key="kwargs.tenant_id"))
    admit(ledger, "a", 10)
    admit(ledger, "b", 10)
    claims = ledger.claim_many("w", 20)
    assert sorted(tenant_of(c.payload) for c in claims) == ["a"] * 3 + ["b"] * 3
    held = ledger.claim_many("w", 20)
    assert len(held) == 0 and held.due_in_ms is not None and 0 < held.due_in_ms <= 334
    ledger.clock_skew_ms += 1000
    assert len(ledger.claim_many("w", 20)) == 6


def test_keys_take_turns(ledger: Ledger) -> None:
    """One key with many due records does not delay one with few: claims alternate."""
    ledger.set_limits(Limits(key="kwargs.tenant_id"))
    admit(ledger, "big", 300)
    admit(ledger, "small", 5)
    order: list[object] = []
    while len(order) < 20:
        order += [tenant_of(c.payload) for c in ledger.claim_many("w", 4)]
    assert order[:10].count("small") == 5  # every small record within the first ten claims
    # Within a key, its own due order.
    assert order.count("big") == 15


def test_slots_of_a_killed_worker_come_back_after_its_lease(ledger: Ledger) -> None:
    ledger.set_limits(Limits(concurrency=1, key="kwargs.tenant_id"))
    admit(ledger, "a", 3)
    first = ledger.claim_many("dead-worker", 5, lease=2)
    assert len(first) == 1
    assert len(ledger.claim_many("w", 5)) == 0  # its slot is taken
    ledger.clock_skew_ms += 2500
    assert len(ledger.claim_many("w", 5)) == 0  # expired, not yet reclaimed: still its slot
    cursor = ledger.repair()
    while cursor != "0":
        cursor = ledger.repair(cursor)
    again = ledger.claim_many("w", 5)
    assert len(again) == 1
    assert ledger.resolve(first[0].request_id).state in (State.PENDING, State.CLAIMED)


def test_a_retried_record_comes_back_into_its_keys_turn(ledger: Ledger) -> None:
    ledger.set_limits(Limits(concurrency=1, key="kwargs.tenant_id"))
    admit(ledger, "a", 1)
    (claim,) = ledger.claim_many("w", 5)
    ledger.settle(claim, State.PENDING)  # a retry, due now
    (again,) = ledger.claim_many("w", 5)
    assert again.request_id == claim.request_id and again.attempt == 2


def test_a_delayed_record_enters_its_keys_turn_when_due(ledger: Ledger) -> None:
    ledger.set_limits(Limits(concurrency=5, key="kwargs.tenant_id"))
    ledger.admit("later", payload("a"), delay=5)
    claims = ledger.claim_many("w", 5)
    assert len(claims) == 0 and claims.due_in_ms is not None and 0 < claims.due_in_ms <= 5000
    ledger.clock_skew_ms += 5000
    assert [c.request_id for c in ledger.claim_many("w", 5)] == ["later"]


def test_use_shows_each_key(ledger: Ledger) -> None:
    ledger.set_limits(Limits(rate=Rate(2, 1000, 2), concurrency=3, key="kwargs.tenant_id"))
    admit(ledger, "a", 5)
    admit(ledger, "b", 1)
    ledger.claim_many("w", 10)
    use = ledger.limits()
    assert use.limits.key == "kwargs.tenant_id" and use.slots_taken == 3
    rows = {k.key: k for k in use.keys}
    assert rows["a"].due == 3 and rows["a"].slots_taken == 2
    assert rows["a"].tokens_left is not None and rows["a"].tokens_left < 1
    assert use.keys_waiting >= 1 and use.held == 3


def test_an_unlimited_queue_writes_no_limits_state(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    admit(ledger, "a", 3)
    ledger.claim_many("w", 3)
    assert not redis_client.exists(ledger.runner.keys.limits, ledger.runner.keys.keyed)


def test_a_turn_of_held_keys_does_not_spin_and_moves_on(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    ledger.set_limits(Limits(concurrency=1, key="kwargs.tenant_id"))
    for k in range(150):
        admit(ledger, f"k{k}", 2)
    running = 0
    while claims := ledger.claim_many("w", 8):
        running += len(claims)
    assert running == 150  # one per key: every key is at its limit now
    assert ledger.claim_many("w", 8).due_in_ms is None
    assert not redis_client.exists(ledger.runner.keys.wake)  # nobody is told to look again
    admit(ledger, "fresh", 1)  # behind 150 held keys in the turns
    calls = []
    for _ in range(3):
        got = ledger.claim_many("w", 8)
        calls.append([c.request_id for c in got])
        if got:
            break
    assert calls[-1] == ["fresh-00000"] and len(calls) <= 3


KEY = "kwargs.tenant_id"


def drain(ledger: Ledger) -> int:
    """Claim and complete until a claim answers nothing; answer how many ran."""
    done = 0
    while claims := ledger.claim_many("w", 8):
        done += len(claims)
        ledger.settle_many([(c, State.COMPLETED, 0) for c in claims])
    return done


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param(Limits(concurrency=2, key=KEY), id="concurrency"),
        pytest.param(Limits(Rate(1000, 1000, 1000), None, KEY), id="rate"),
        pytest.param(Limits(key=KEY), id="fair-share"),
    ],
)
def test_new_keys_are_claimed_at_once_after_many_old_keys(ledger: Ledger, limits: Limits) -> None:
    ledger.set_limits(limits)
    for k in range(400):
        admit(ledger, f"old{k}", 1)
    assert drain(ledger) == 400
    for k in range(24):
        admit(ledger, f"new{k}", 1)
    # As from a fresh queue: every call claims a full batch, none answers "nothing due".
    calls = [ledger.claim_many("w", 8) for _ in range(3)]
    assert [len(c) for c in calls] == [8, 8, 8]
    assert not ledger.claim_many("w", 8)


def test_a_call_that_only_drops_stale_turns_asks_to_be_called_again(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    # Turns left by an older version (keys with nothing due): a call that spends its
    # budget dropping them says "look again now", so a worker does not sleep on due work.
    ledger.set_limits(Limits(concurrency=2, key=KEY))
    pool, limits_key = ledger.runner.keys.keyed, ledger.runner.keys.limits
    stale = {f"r{n:016d}gone{n}": 0 for n in range(1, 301)}
    redis_client.zadd(pool, stale)
    redis_client.hset(limits_key, mapping={f"Rgone{n}": f"{n:016d}" for n in range(1, 301)})
    redis_client.hset(limits_key, "turn", 300)
    admit(ledger, "fresh", 1)  # its turn is behind the 300 stale ones
    answers = []
    for _ in range(6):
        got = ledger.claim_many("w", 8)
        answers.append((len(got), got.due_in_ms))
        if got:
            break
    assert answers[-1][0] == 1
    assert all(due == 0 for n, due in answers[:-1]), answers


@pytest.mark.parametrize(
    "limits",
    [
        pytest.param(Limits(Rate(5, 1000, 5), 2, KEY), id="both"),
        pytest.param(Limits(None, 1, KEY), id="concurrency"),
    ],
)
def test_old_keys_leave_no_limits_state_behind(
    ledger: Ledger, redis_client: redis.Redis, limits: Limits
) -> None:
    ledger.set_limits(limits)
    pool, limits_key = ledger.runner.keys.keyed, ledger.runner.keys.limits
    for k in range(300):
        admit(ledger, f"old{k}", 1)
    assert drain(ledger) == 300
    ledger.clock_skew_ms += 2000  # every bucket full again
    # Each claim call looks at a bounded batch of the keys that left the turns.
    for _ in range(20):
        assert not ledger.claim_many("w", 8)
    fields = [f.decode() if isinstance(f, bytes) else f for f in redis_client.hkeys(limits_key)]
    per_key = [f for f in fields if f[0] in "TARz" and "old" in f]
    assert per_key == [], per_key[:5]
    assert redis_client.zcard(pool) == 0, redis_client.zrange(pool, 0, 4)
    # What is left per old key is its record's key, which goes with the record.
    assert len([f for f in fields if f.startswith("@")]) == 300


def test_a_key_still_claimed_keeps_its_slot_after_it_leaves_the_turns(
    ledger: Ledger,
) -> None:
    ledger.set_limits(Limits(concurrency=1, key=KEY))
    for k in range(100):
        admit(ledger, f"old{k}", 1)
    running: list[Claim] = []
    while claims := ledger.claim_many("w", 8, lease=600):
        running += claims
    assert len(running) == 100
    ledger.clock_skew_ms += 5000  # state sweeps come due; the leases run on
    admit(ledger, "old7", 1, prefix="again")
    assert not ledger.claim_many("w", 8)  # old7's one slot is still taken
    ledger.settle_many([(c, State.COMPLETED, 0) for c in running if "old7-" in c.request_id])
    assert [c.request_id for c in ledger.claim_many("w", 8)] == ["again-00000"]
