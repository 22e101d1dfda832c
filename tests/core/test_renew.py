"""renew: extend a lease that is still this claim's, else LOST (its LOST cases: ``test_settle.py``)."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis

from django_ledger import Claim, Ledger, SettlementStatus, State
from tests.support.ledger_helpers import (
    advance,
    count_calls,
    dump,
    expire_and_repair,
    indexes_of,
    raw,
)

pytest_plugins = ["tests.support.ledger_fixtures"]

RENEWED = SettlementStatus.RENEWED
SETTLED = SettlementStatus.SETTLED
LOST = SettlementStatus.LOST


def _claimed(ledger: Ledger, request_id: str = "a", lease: float = 10) -> Claim:
    ledger.admit(request_id, "p")
    claim = ledger.claim("w", lease=lease)
    assert claim is not None
    assert claim.request_id == request_id
    return claim


def test_renewed_extends_the_lease(ledger: Ledger) -> None:
    claim = _claimed(ledger, lease=10)
    first_lease = claim.lease_until
    advance(ledger, 5_000)
    before = ledger.server_time_ms()
    settlement = ledger.renew(claim, lease=timedelta(minutes=2))
    after = ledger.server_time_ms()

    assert settlement.status is RENEWED
    assert settlement.ok
    assert settlement.reason is None
    record = settlement.record
    assert record is not None
    assert record == ledger.resolve("a")
    assert record.state is State.CLAIMED
    assert before + 120_000 <= record.lease_until <= after + 120_000  # type: ignore[operator]
    assert record.lease_until > first_lease  # type: ignore[operator]
    # Owner, attempts and fence are kept; the Claim object follows the new lease.
    assert (record.owner, record.attempts, record.fence) == ("w", 1, claim.fence)
    assert claim.lease_until == record.lease_until
    assert indexes_of(ledger, "a") == {"leases": record.lease_until}


def test_renewed_claim_survives_past_its_first_lease(ledger: Ledger) -> None:
    claim = _claimed(ledger, lease=10)
    assert ledger.renew(claim, lease=60).status is RENEWED
    advance(ledger, 30_000)  # the first lease is long gone, the renewed one is not
    assert expire_and_repair(ledger, 0).expired == 0
    assert ledger.renew(claim, lease=60).status is RENEWED
    advance(ledger, 30_000)
    settlement = ledger.settle(claim, State.COMPLETED)
    assert settlement.status is SETTLED
    assert settlement.record is not None
    assert settlement.record.state is State.COMPLETED
    assert settlement.record.fence == claim.fence


def test_default_lease_is_30_seconds(ledger: Ledger) -> None:
    claim = _claimed(ledger, lease=1)
    before = ledger.server_time_ms()
    settlement = ledger.renew(claim)
    after = ledger.server_time_ms()
    assert settlement.status is RENEWED
    assert before + 30_000 <= claim.lease_until <= after + 30_000


def test_same_claim_settles_after_renew(ledger: Ledger) -> None:
    claim = _claimed(ledger)
    for _ in range(3):
        assert ledger.renew(claim).status is RENEWED
    settlement = ledger.settle(claim, State.FAILED)
    assert settlement.status is SETTLED
    record = ledger.resolve("a")
    assert record is not None
    assert record.state is State.FAILED


def test_renew_just_before_expiry_is_renewed(ledger: Ledger) -> None:
    claim = _claimed(ledger, lease=60)
    advance(ledger, 50_000)
    assert ledger.renew(claim, lease=60).status is RENEWED


def test_renew_many_claims_only_moves_their_own(ledger: Ledger) -> None:
    ledger.admit_many([("a", "p"), ("b", "p")])
    a, b = ledger.claim_many("w", 2, lease=10)
    before_b = raw(ledger, b.request_id)
    assert ledger.renew(a, lease=100).status is RENEWED
    assert raw(ledger, b.request_id) == before_b


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("claim", [None, "a", ("a", 1), {"request_id": "a"}])
def test_non_claim_is_a_type_error(ledger: Ledger, claim: object) -> None:
    with pytest.raises(TypeError):
        ledger.renew(claim)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("lease", "error"),
    [
        (0, ValueError),
        (-1, ValueError),
        (timedelta(0), ValueError),
        ("30", TypeError),
        (None, TypeError),
    ],
)
def test_bad_lease(ledger: Ledger, lease: object, error: type[Exception]) -> None:
    claim = _claimed(ledger)
    before = dump(ledger)
    with pytest.raises(error, match="lease"):
        ledger.renew(claim, lease=lease)  # type: ignore[arg-type]
    assert dump(ledger) == before


def test_renew_many_renews_each_claim_in_one_round_trip(
    ledger: Ledger, redis_client: redis.Redis
) -> None:
    ledger.admit_many([(f"job-{i}", "p") for i in range(3)])
    claims = ledger.claim_many("w", 3, lease=10)
    assert len(claims) == 3
    stale = Claim(claims[2].request_id, "p", "someone-else", 1, 1, claims[2].lease_until)
    before = [claim.lease_until for claim in claims[:2]]
    with count_calls(redis_client) as calls:
        results = ledger.renew_many([(claims[0], 60), (claims[1], 60), (stale, 60)])
    if ledger.optimized:
        assert calls.fcall == 1
    assert [r.status for r in results] == [
        SettlementStatus.RENEWED,
        SettlementStatus.RENEWED,
        SettlementStatus.LOST,
    ]
    assert results[2].reason == "superseded"
    for claim, old in zip(claims[:2], before, strict=True):
        assert claim.lease_until >= old + 49_000
        record = ledger.resolve(claim.request_id)
        assert record is not None and record.lease_until == claim.lease_until


def test_renew_many_refuses_bad_items_before_any_write(ledger: Ledger) -> None:
    ledger.admit("job", "p")
    claim = ledger.claim("w", lease=10)
    assert claim is not None
    before = dump(ledger)
    for items, error in [
        ([("not a claim", 10)], TypeError),
        ([claim], TypeError),
        ([(claim, 10), (claim, -1)], ValueError),
        ([(claim, 0)], ValueError),
    ]:
        with pytest.raises(error):
            ledger.renew_many(items)  # type: ignore[arg-type]
    assert dump(ledger) == before
