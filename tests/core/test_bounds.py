"""The two bounds: live records make a queue full, ended records are kept up to a count.

``max_records`` bounds PENDING and CLAIMED records (and quarantined ids); ``max_retained``
bounds COMPLETED, FAILED and DEAD ones, purging the oldest first, so memory stays bounded
however many tasks a queue ends. Both modes, every path that ends a record.
"""

from __future__ import annotations

from collections.abc import Callable

from django_ledger import AdmissionStatus, Ledger, State
from tests.support.ledger_helpers import advance, corrupt, index, repair_all

pytest_plugins = ["tests.support.ledger_fixtures"]

ADMITTED = AdmissionStatus.ADMITTED
DUPLICATE = AdmissionStatus.DUPLICATE
FULL = AdmissionStatus.FULL


def _end(ledger: Ledger, ids: list[str], state: State = State.COMPLETED) -> None:
    """Admit, claim and settle ``ids`` one after another (one millisecond or more apart)."""
    for request_id in ids:
        assert ledger.admit(request_id, "p").status is ADMITTED
        claim = ledger.claim("w")
        assert claim is not None and claim.request_id == request_id
        assert ledger.settle(claim, state).ok
        advance(ledger, 1)  # each ends at its own instant: "oldest" is well defined


def _ended(ledger: Ledger) -> set[str]:
    return {
        request_id for key in ledger.terminal_keys.values() for request_id in index(ledger, key)
    }


def test_settling_past_max_retained_purges_the_oldest_ended(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(max_retained=4)
    _end(ledger, [f"a{n}" for n in range(3)], State.COMPLETED)
    _end(ledger, [f"b{n}" for n in range(3)], State.FAILED)
    kept = {"a2", "b0", "b1", "b2"}
    assert _ended(ledger) == kept
    stats = ledger.stats()
    assert (stats.completed, stats.failed, stats.total) == (1, 3, 4)
    assert ledger.resolve("a0") is None and ledger.resolve("a1") is None
    # A kept id is still recognised; a purged one is a new request again.
    assert ledger.admit("a2", "p").status is DUPLICATE
    assert ledger.admit("a0", "p").status is ADMITTED


def test_a_batch_settlement_keeps_the_bound(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_retained=3)
    _end(ledger, ["old0", "old1"])
    ledger.admit_many([(f"n{n}", "p") for n in range(5)])
    claims = ledger.claim_many("w", 5)
    answers = ledger.settle_many([(claim, State.COMPLETED) for claim in claims])
    assert all(answer.ok for answer in answers)
    ended = _ended(ledger)
    assert len(ended) == 3 and not ended & {"old0", "old1"}
    assert ledger.stats().completed == 3


def test_settle_and_claim_keeps_the_bound(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_retained=2)
    _end(ledger, ["old0", "old1"])
    ledger.admit_many([("x", "p"), ("y", "p")])
    first = ledger.claim("w")
    assert first is not None
    settled, claims = ledger.settle_and_claim([(first, State.COMPLETED)], "w", 5)
    assert settled[0].ok and [claim.request_id for claim in claims] == ["y"]
    assert _ended(ledger) == {"old1", first.request_id}


def test_repair_purges_down_to_a_lowered_bound(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory()
    _end(ledger, [f"e{n}" for n in range(6)])
    lowered = ledger_factory(max_retained=2)
    report = repair_all(lowered)
    assert report.purged == 4
    assert _ended(lowered) == {"e4", "e5"}
    assert lowered.resolve("e0") is None and lowered.resolve("e5") is not None


def test_dead_records_count_as_ended(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_attempts=1, max_retained=1)
    ledger.admit("d", "p")
    assert ledger.claim("w", lease=1) is not None
    advance(ledger, 2_000)
    assert repair_all(ledger).dead == 1
    advance(ledger, 1)
    _end(ledger, ["k"])
    assert _ended(ledger) == {"k"}
    assert ledger.resolve("d") is None


def test_a_purge_by_count_takes_the_stored_result_with_it(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(max_retained=1)
    for request_id in ("r1", "r2"):
        ledger.admit(request_id, "p")
        claim = ledger.claim("w")
        assert claim is not None
        assert ledger.settle(claim, State.COMPLETED, result=f"result of {request_id}").ok
        advance(ledger, 1)
    assert ledger.results(["r1", "r2"]) == [None, b"result of r2"]


def test_live_records_alone_make_a_queue_full(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_records=2, max_retained=100)
    _end(ledger, [f"done{n}" for n in range(5)])  # five ended: still room for two
    assert [a.status for a in ledger.admit_many([("p1", "p"), ("p2", "p"), ("p3", "p")])] == [
        ADMITTED,
        ADMITTED,
        FULL,
    ]
    assert ledger.claim("w") is not None  # a claimed record is live too
    assert ledger.admit("p3", "p").status is FULL


def test_quarantined_ids_stay_live_until_an_operator_acts(
    ledger_factory: Callable[..., Ledger],
) -> None:
    ledger = ledger_factory(max_records=1)
    ledger.admit("a", "p")
    corrupt(ledger, "a")
    assert repair_all(ledger).quarantined == 1
    assert ledger.admit("b", "p").status is FULL


def test_ended_imports_never_make_a_queue_full(ledger_factory: Callable[..., Ledger]) -> None:
    ledger = ledger_factory(max_records=1)
    ledger.admit("live", "p")
    ledger.close_gate()
    now = ledger.server_time_ms()
    done = ledger.import_record("old", "p", State.COMPLETED, now)
    waiting = ledger.import_record("later", "p", State.PENDING, now)
    assert (done.status, waiting.status) == (ADMITTED, FULL)
