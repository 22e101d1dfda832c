"""The operator's gate: while it exists no claim succeeds; nothing else stops."""

from __future__ import annotations

from collections.abc import Callable

import redis

from django_ledger import Ledger, SettlementStatus, State
from tests.support.ledger_helpers import dump

pytest_plugins = ["tests.support.ledger_fixtures"]


def test_gate_is_open_by_default(ledger: Ledger, redis_client: redis.Redis) -> None:
    assert ledger.gate_closed is False
    assert redis_client.exists(ledger.gate_key) == 0
    assert ledger.stats().gate_closed is False


def test_close_and_open(ledger: Ledger, redis_client: redis.Redis) -> None:
    ledger.close_gate()
    assert ledger.gate_closed is True
    assert redis_client.exists(ledger.gate_key) == 1
    assert ledger.stats().gate_closed is True
    ledger.close_gate()  # idempotent
    assert ledger.gate_closed is True
    ledger.open_gate()
    assert ledger.gate_closed is False
    assert redis_client.exists(ledger.gate_key) == 0
    ledger.open_gate()  # idempotent
    assert ledger.gate_closed is False


def test_gate_is_shared_by_every_ledger_of_the_queue(
    ledger: Ledger, ledger_factory: Callable[..., Ledger]
) -> None:
    other = ledger_factory()
    ledger.close_gate()
    assert other.gate_closed is True
    other.admit("a", "p")
    assert other.claim("w") is None
    other.open_gate()
    assert ledger.gate_closed is False


def test_gate_of_one_queue_does_not_close_another(
    ledger_factory: Callable[..., Ledger],
) -> None:
    first = ledger_factory(queue="one")
    second = ledger_factory(queue="two")
    first.admit("a", "p")
    second.admit("a", "p")
    first.close_gate()
    assert first.claim("w") is None
    assert second.gate_closed is False
    assert second.claim("w") is not None


def test_no_claim_while_closed_and_nothing_changes(ledger: Ledger) -> None:
    ledger.admit_many([("a", "p"), ("b", "p")])
    ledger.close_gate()
    before = dump(ledger)
    assert ledger.claim("w") is None
    assert ledger.claim_many("w", 10) == []
    assert dump(ledger) == before
    ledger.open_gate()
    assert [c.request_id for c in ledger.claim_many("w", 10)] == ["a", "b"]


def test_admission_renew_and_settle_go_on_while_closed(ledger: Ledger) -> None:
    ledger.admit_many([("a", "p"), ("b", "p")])
    a, b = ledger.claim_many("w", 2)
    ledger.close_gate()
    assert ledger.admit("c", "p").accepted
    assert ledger.renew(a).status is SettlementStatus.RENEWED
    assert ledger.settle(a).status is SettlementStatus.SETTLED
    assert ledger.settle(b, State.PENDING).status is SettlementStatus.SETTLED
    assert ledger.claim("w") is None
    ledger.open_gate()
    assert {c.request_id for c in ledger.claim_many("w", 5)} == {"b", "c"}
