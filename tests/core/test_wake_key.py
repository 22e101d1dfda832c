"""The wake key an idle worker blocks on: which writes set it, which claims clear it.

Every test runs on both paths (fused scripts and the reference path): the wake key's
rules are the same on each, and ``Claims.due_in_ms`` says when the next record is due.
"""

from __future__ import annotations

import redis

from django_ledger import Ledger, State

pytest_plugins = ["tests.support.ledger_fixtures"]


def wake_key(ledger: Ledger) -> str:
    return ledger.runner.keys.wake


def woken(ledger: Ledger, client: redis.Redis) -> bool:
    return bool(client.exists(wake_key(ledger)))


def test_the_wake_key_is_in_the_queues_slot(ledger: Ledger) -> None:
    assert wake_key(ledger) == ledger.records_key.replace(":records", ":wake")
    assert ledger.wake_keys() == [(ledger.redis, wake_key(ledger))]


def test_an_admission_sets_it_and_a_claim_that_takes_everything_clears_it(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    assert not woken(ledger, redis_client)
    ledger.admit("a", "p")
    assert woken(ledger, redis_client)
    claims = ledger.claim_many("w", 5)
    assert [c.request_id for c in claims] == ["a"]
    assert not woken(ledger, redis_client)
    assert claims.due_in_ms is None  # nothing else is pending


def test_a_claim_that_fills_its_limit_passes_the_wake_up_on(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    ledger.admit_many([("a", "p"), ("b", "p")])
    redis_client.delete(wake_key(ledger))
    claims = ledger.claim_many("w", 1)
    assert len(claims) == 1
    assert woken(ledger, redis_client)  # "b" is due: another idle worker should wake
    assert claims.due_in_ms == 0


def test_a_claim_answers_when_the_next_record_falls_due(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    ledger.admit("later", "p", delay=60)
    ledger.admit("high-later", "p", delay=30, priority=5)
    assert woken(ledger, redis_client)  # a worker learns the due time
    _, claims = ledger.settle_and_claim([], "w", 4)
    assert claims == []
    assert not woken(ledger, redis_client)
    assert claims.due_in_ms is not None
    assert 25_000 < claims.due_in_ms <= 30_000


def test_giving_back_and_retrying_now_set_it(ledger: Ledger, redis_client: redis.Redis) -> None:
    ledger.admit_many([("a", "p"), ("b", "p")])
    first, second = ledger.claim_many("w", 2)
    assert not woken(ledger, redis_client)
    ledger.release([first])
    assert woken(ledger, redis_client)
    redis_client.delete(wake_key(ledger))
    ledger.settle(second, State.PENDING, 0)
    assert woken(ledger, redis_client)


def test_repair_giving_an_expired_lease_back_sets_it(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    ledger.admit("a", "p")
    assert ledger.claim("w", lease=0.05) is not None
    assert not woken(ledger, redis_client)
    ledger.runner.clock_skew_ms = 1000  # the lease has ended
    report = ledger.repair_page("0", 100)
    assert report.expired == 1
    assert woken(ledger, redis_client)


def test_while_the_gate_is_closed_a_claim_says_look_again_in_a_second(ledger: Ledger) -> None:
    ledger.admit("a", "p")
    ledger.close_gate()
    claims = ledger.claim_many("w", 1)
    assert claims == []
    assert claims.due_in_ms == 1000
