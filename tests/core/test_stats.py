"""stats: every counter of a queue, after a scripted sequence of operations."""

from __future__ import annotations

from collections.abc import Callable

from django_ledger import Ledger, State, Stats
from tests.support.ledger_helpers import advance, corrupt, raw

pytest_plugins = ["tests.support.ledger_fixtures"]


def test_empty_queue(ledger: Ledger) -> None:
    before = ledger.server_time_ms()
    stats = ledger.stats()
    after = ledger.server_time_ms()
    assert isinstance(stats, Stats)
    assert before <= stats.now <= after
    assert stats.as_dict() == {
        "pending_due": 0,
        "pending_later": 0,
        "claimed": 0,
        "expired_leases": 0,
        "completed": 0,
        "failed": 0,
        "dead": 0,
        "quarantined": 0,
        "total": 0,
        "gate_closed": False,
        "oldest_due_age_ms": None,
    }
    assert stats.pending == 0
    assert stats.oldest_due_at is None


def _claim_one(ledger: Ledger, request_id: str, lease: float) -> None:
    ledger.admit(request_id, "p")
    claim = ledger.claim("w", lease=lease)
    assert claim is not None
    assert claim.request_id == request_id


def test_every_counter_after_a_scripted_sequence(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_attempts=1)
    # completed: c
    ledger.admit("c", "p")
    claim = ledger.claim("w")
    assert claim is not None
    assert ledger.settle(claim, State.COMPLETED).ok
    # failed: f
    ledger.admit("f", "p")
    claim = ledger.claim("w")
    assert claim is not None
    assert ledger.settle(claim, State.FAILED).ok
    # claimed: i (becomes dead below), a (lease expires, not repaired), b (lease holds)
    _claim_one(ledger, "i", lease=1)
    _claim_one(ledger, "a", lease=1)
    _claim_one(ledger, "b", lease=3600)
    # quarantined: q
    ledger.admit("q", "p")
    corrupt(ledger, "q")
    assert ledger.repair_records([("q", raw(ledger, "q"))]).quarantined == 1  # type: ignore[list-item]
    # pending due now: g, h; pending later: d, e
    ledger.admit_many([("g", "p"), ("h", "p")])
    ledger.admit_many([("d", "p"), ("e", "p")], delay=3600)
    # Time passes: the leases of i and a expire; repair looks at i only: DEAD.
    advance(ledger, 5_000)
    assert ledger.repair_records([("i", raw(ledger, "i"))]).dead == 1  # type: ignore[list-item]
    ledger.close_gate()

    before = ledger.server_time_ms()
    stats = ledger.stats()
    after = ledger.server_time_ms()

    assert stats.pending_due == 2
    assert stats.pending_later == 2
    assert stats.pending == 4
    assert stats.claimed == 2
    assert stats.expired_leases == 1
    assert stats.completed == 1
    assert stats.failed == 1
    assert stats.dead == 1
    assert stats.quarantined == 1
    assert stats.total == 10
    assert stats.gate_closed is True
    assert before <= stats.now <= after
    g, h = ledger.resolve_many(["g", "h"])
    assert g is not None and h is not None
    assert stats.oldest_due_at == min(g.due_at, h.due_at)
    assert stats.oldest_due_age_ms == stats.now - stats.oldest_due_at
    assert stats.as_dict()["oldest_due_age_ms"] == stats.oldest_due_age_ms
    assert stats.as_dict()["expired_leases"] == 1


def test_counters_follow_time(ledger: Ledger) -> None:
    ledger.admit("later", "p", delay=60)
    _claim_one(ledger, "held", lease=30)
    stats = ledger.stats()
    assert (stats.pending_due, stats.pending_later, stats.expired_leases) == (0, 1, 0)
    assert stats.oldest_due_age_ms is None  # the oldest entry is not due yet
    advance(ledger, 61_000)
    stats = ledger.stats()
    assert (stats.pending_due, stats.pending_later, stats.expired_leases) == (1, 0, 1)
    assert stats.oldest_due_age_ms is not None
    assert stats.oldest_due_age_ms >= 1_000


def test_stats_change_nothing(ledger: Ledger) -> None:
    ledger.admit("a", "p")
    first = ledger.stats().as_dict()
    second = ledger.stats().as_dict()
    # Only the age of the oldest due record moves, with the clock.
    assert first.pop("oldest_due_age_ms") <= second.pop("oldest_due_age_ms")  # type: ignore[operator]
    assert first == second
    assert first["total"] == 1
