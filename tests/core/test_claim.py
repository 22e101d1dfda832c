"""claim: the earliest due record, under a lease judged by the server clock."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
import redis

from django_ledger import Claim, Ledger, State
from tests.support.ledger_helpers import (
    TRACEPARENT,
    advance,
    corrupt,
    dump,
    expire_and_repair,
    index,
    indexes_of,
    raw,
)
from tests.support.redis_server import RedisServer

pytest_plugins = ["tests.support.ledger_fixtures"]


def test_claim_of_an_empty_queue_is_none(ledger: Ledger) -> None:
    assert ledger.claim("w") is None
    assert ledger.claim_many("w", 5) == []


def test_claim_hands_over_the_record(ledger: Ledger) -> None:
    ledger.admit("a", "payload a", traceparent=TRACEPARENT)
    before = ledger.server_time_ms()
    claim = ledger.claim("worker-1", lease=timedelta(seconds=45))
    after = ledger.server_time_ms()

    assert isinstance(claim, Claim)
    assert claim.request_id == "a"
    assert claim.payload == "payload a"
    assert claim.owner == "worker-1"
    assert claim.attempt == 1
    # A new queue's fence counter starts at the server clock in microseconds.
    assert before * 1000 <= claim.fence <= after * 1000
    assert claim.traceparent == TRACEPARENT
    assert before + 45_000 <= claim.lease_until <= after + 45_000
    assert claim.lease_until_datetime.timestamp() * 1000 == pytest.approx(claim.lease_until)

    record = ledger.resolve("a")
    assert record is not None
    assert record.state is State.CLAIMED
    assert record.owner == "worker-1"
    assert record.attempts == 1
    assert record.fence == claim.fence
    assert record.lease_until == claim.lease_until
    assert record.updated_at == claim.lease_until - 45_000
    assert indexes_of(ledger, "a") == {"leases": claim.lease_until}


@pytest.mark.parametrize(
    ("lease", "lease_ms"), [(30, 30_000), (0.25, 250), (timedelta(hours=2), 7_200_000)]
)
def test_lease_is_server_now_plus_lease(
    ledger: Ledger, lease: timedelta | float, lease_ms: int
) -> None:
    ledger.admit("a", "p")
    before = ledger.server_time_ms()
    claim = ledger.claim("w", lease=lease)
    after = ledger.server_time_ms()
    assert claim is not None
    assert before + lease_ms <= claim.lease_until <= after + lease_ms


def test_default_lease_is_30_seconds(ledger: Ledger) -> None:
    ledger.admit("a", "p")
    before = ledger.server_time_ms()
    claim = ledger.claim("w")
    after = ledger.server_time_ms()
    assert claim is not None
    assert before + 30_000 <= claim.lease_until <= after + 30_000


def test_earliest_due_first(ledger: Ledger) -> None:
    ledger.admit("third", "p", delay=30)
    ledger.admit("first", "p", delay=10)
    ledger.admit("second", "p", delay=20)
    ledger.admit("not-yet", "p", delay=3600)
    advance(ledger, 60_000)
    order = []
    while (claim := ledger.claim("w")) is not None:
        order.append(claim.request_id)
    assert order == ["first", "second", "third"]


def test_not_before_due(ledger: Ledger) -> None:
    ledger.admit("later", "p", delay=60)
    assert ledger.claim("w") is None
    advance(ledger, 50_000)
    assert ledger.claim("w") is None
    record = ledger.resolve("later")
    assert record is not None
    assert record.state is State.PENDING
    advance(ledger, 10_000)
    claim = ledger.claim("w")
    assert claim is not None
    assert claim.request_id == "later"


def test_none_while_the_gate_is_closed(ledger: Ledger) -> None:
    ledger.admit("a", "p")
    ledger.admit("b", "p")
    ledger.close_gate()
    before = dump(ledger)
    assert ledger.claim("w") is None
    assert ledger.claim_many("w", 10) == []
    assert dump(ledger) == before
    ledger.open_gate()
    claims = ledger.claim_many("w", 10)
    assert [c.request_id for c in claims] == ["a", "b"]


def test_attempts_and_fence_grow_with_every_claim(ledger: Ledger) -> None:
    ledger.admit("a", "p")
    fences = []
    for attempt in (1, 2, 3):
        claim = ledger.claim("w", lease=10)
        assert claim is not None
        assert claim.attempt == attempt
        fences.append(claim.fence)
        if attempt == 1:
            # A worker gives it back as a retry.
            assert ledger.settle(claim, State.PENDING).ok
        else:
            # The lease expires and repair takes it back.
            assert expire_and_repair(ledger, 11_000).expired == 1
    assert fences == sorted(set(fences))
    assert fences[0] >= 1


def test_claim_does_not_touch_other_records(ledger: Ledger) -> None:
    ledger.admit("a", "p")
    ledger.admit("b", "p", delay=60)
    before_b = raw(ledger, "b")
    ledger.claim("w")
    assert raw(ledger, "b") == before_b
    assert index(ledger, ledger.ready_key) == {"b": ledger.resolve("b").due_at}  # type: ignore[union-attr]


def test_corrupt_record_is_skipped_and_the_next_claimed(ledger: Ledger) -> None:
    ledger.admit("bad", "p", delay=0)
    advance(ledger, 1)
    ledger.admit("good", "p")
    corrupt(ledger, "bad")

    claim = ledger.claim("w")

    assert claim is not None
    assert claim.request_id == "good"
    # The corrupt bytes are left exactly as they were, for repair to quarantine.
    assert raw(ledger, "bad") == b"not a ledger record"
    assert ledger.claim("w") is None


def test_bit_flip_is_skipped(ledger: Ledger) -> None:
    ledger.admit("a", "payload")
    stored = raw(ledger, "a")
    assert stored is not None
    flipped = stored[:-1] + b"Q"
    ledger.redis.hset(ledger.records_key, "a", flipped)
    assert ledger.claim("w") is None
    assert raw(ledger, "a") == flipped


def test_many_corrupt_records_at_the_head_do_not_hide_good_ones(ledger: Ledger) -> None:
    ledger.admit_many([(f"bad-{n:02}", "p") for n in range(20)])
    advance(ledger, 5)
    ledger.admit("good", "p")
    for n in range(20):
        corrupt(ledger, f"bad-{n:02}")
    claim = ledger.claim("w")
    assert claim is not None
    assert claim.request_id == "good"


def test_claim_trusts_the_record_not_a_stale_index(ledger: Ledger) -> None:
    ledger.admit("later", "p", delay=3600)
    ledger.admit("held", "p")
    held = ledger.claim("w1")
    assert held is not None
    # Index entries that disagree with their records: both look due now.
    ledger.redis.zadd(ledger.ready_key, {"later": 0, "held": 0})
    raw_later, raw_held = raw(ledger, "later"), raw(ledger, "held")

    assert ledger.claim("w2") is None

    assert (raw(ledger, "later"), raw(ledger, "held")) == (raw_later, raw_held)
    assert ledger.renew(held).ok


@pytest.mark.standalone_only(reason="its claimers' clients are on the standalone URL")
def test_two_claimers_never_get_the_same_record(
    ledger_factory: Callable[..., Ledger], redis_server: RedisServer
) -> None:
    ledger = ledger_factory()
    ids = [f"r{n:03}" for n in range(200)]
    ledger.admit_many((i, "p") for i in ids)
    clients = [redis_server.client() for _ in range(3)]
    claimers = [ledger_factory(client=client) for client in clients]
    got: list[list[str]] = [[] for _ in claimers]
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            while True:
                batch = claimers[n].claim_many(f"w{n}", 3)
                if not batch:
                    return
                got[n] += [c.request_id for c in batch]
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(len(claimers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    for client in clients:
        client.close()
    assert not errors
    claimed = [i for part in got for i in part]
    assert sorted(claimed) == ids  # every record once, none twice
    for n, part in enumerate(got):
        for request_id in part[:3]:
            record = ledger.resolve(request_id)
            assert record is not None
            assert (record.state, record.owner, record.attempts) == (State.CLAIMED, f"w{n}", 1)


def test_a_claimed_record_is_not_claimed_again(ledger: Ledger) -> None:
    ledger.admit("a", "p")
    assert ledger.claim("w1") is not None
    before = dump(ledger)
    assert ledger.claim("w2") is None
    assert dump(ledger) == before


# -- bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize("owner", ["", "x" * 257, "tab\t", "new\nline", "nul\x00", "lone \ud800"])
def test_unusable_owner_is_a_value_error(
    ledger: Ledger, redis_client: redis.Redis, owner: str
) -> None:
    ledger.admit("a", "p")
    before = dump(ledger)
    with pytest.raises(ValueError, match="owner"):
        ledger.claim(owner)
    with pytest.raises(ValueError, match="owner"):
        ledger.claim_many(owner, 3)
    assert dump(ledger) == before


@pytest.mark.parametrize("owner", [None, 1, b"w", ["w"]])
def test_non_text_owner_is_a_type_error(ledger: Ledger, owner: object) -> None:
    ledger.admit("a", "p")
    before = dump(ledger)
    with pytest.raises(TypeError, match="owner"):
        ledger.claim(owner)  # type: ignore[arg-type]
    assert dump(ledger) == before


def test_owner_of_256_bytes_is_fine(ledger: Ledger) -> None:
    ledger.admit("a", "p")
    claim = ledger.claim("é" * 128)
    assert claim is not None
    assert claim.owner == "é" * 128


@pytest.mark.parametrize(
    "lease", [0, -1, timedelta(0), timedelta(seconds=-5), float("nan"), 10**12]
)
def test_bad_lease_value_is_a_value_error(ledger: Ledger, lease: object) -> None:
    ledger.admit("a", "p")
    before = dump(ledger)
    with pytest.raises(ValueError, match="lease"):
        ledger.claim("w", lease=lease)  # type: ignore[arg-type]
    assert dump(ledger) == before


@pytest.mark.parametrize("lease", ["30", None, True, b"30"])
def test_bad_lease_type_is_a_type_error(ledger: Ledger, lease: object) -> None:
    ledger.admit("a", "p")
    before = dump(ledger)
    with pytest.raises(TypeError, match="lease"):
        ledger.claim("w", lease=lease)  # type: ignore[arg-type]
    assert dump(ledger) == before


@pytest.mark.parametrize(
    ("limit", "error"),
    [
        (0, ValueError),
        (-1, ValueError),
        (1.0, TypeError),
        ("3", TypeError),
        (True, TypeError),
        (None, TypeError),
    ],
)
def test_bad_limit(ledger: Ledger, limit: object, error: type[Exception]) -> None:
    ledger.admit("a", "p")
    before = dump(ledger)
    with pytest.raises(error, match="limit"):
        ledger.claim_many("w", limit)  # type: ignore[arg-type]
    assert dump(ledger) == before
