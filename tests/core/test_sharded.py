"""Sharded queues: one queue over several hash tags, seen by callers as one queue.

Every test runs in both modes (fused and reference), on one server and, in the cluster
run, on a 3-master cluster where the shards live on different masters.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.crc import key_slot

from django_ledger import AdmissionStatus, Ledger, LedgerError, SettlementStatus, State
from django_ledger.core.layout import (
    MAX_SHARDS,
    shard_index,
    shard_queues,
)
from django_ledger.core.sharded import ShardedLedger

pytest_plugins = ["tests.support.ledger_fixtures"]

SHARDS = 3


@pytest.fixture
def sharded_factory(
    redis_client: redis.Redis, namespace: str, optimized: bool
) -> Callable[..., ShardedLedger]:
    def build(shards: int = SHARDS, **kw: Any) -> ShardedLedger:
        kw.setdefault("optimized", optimized)
        queue = kw.pop("queue", "q")
        return ShardedLedger(kw.pop("client", redis_client), namespace, queue, shards, **kw)

    return build


@pytest.fixture
def sharded(sharded_factory: Callable[..., ShardedLedger]) -> ShardedLedger:
    return sharded_factory()


def ids_of_shard(index: int, count: int, prefix: str = "id") -> list[str]:
    """``count`` request ids that live in shard ``index`` of a 3-shard queue."""
    found: list[str] = []
    number = 0
    while len(found) < count:
        candidate = f"{prefix}{number}"
        if shard_index(candidate, SHARDS) == index:
            found.append(candidate)
        number += 1
    return found


def shard_sizes(ledger: ShardedLedger) -> list[int]:
    return [shard.stats().total for shard in ledger.shards]


# -- layout ------------------------------------------------------------------------------


def test_shard_zero_is_the_queue_itself_and_each_shard_has_its_own_slot() -> None:
    for shards in (1, 2, 3, 5, 16):
        names = shard_queues("ns", "emails", shards)
        assert names[0] == "emails"
        assert len(set(names)) == shards
        slots = [key_slot(("{ns:%s}" % name).encode()) for name in names]  # noqa: UP031
        # one shard in each of `shards` equal segments of the slot ring
        assert sorted(slot * shards // 16384 for slot in slots) == list(range(shards))


def test_shard_counts_out_of_range_are_refused(redis_client: redis.Redis, namespace: str) -> None:
    for bad in (0, MAX_SHARDS + 1, -1):
        with pytest.raises(ValueError, match="shards must be from 1"):
            ShardedLedger(redis_client, namespace, "q", bad)
    with pytest.raises(TypeError, match="shards must be an int"):
        ShardedLedger(redis_client, namespace, "q", "3")  # type: ignore[arg-type]


@given(st.text(min_size=1, max_size=40))
@settings(max_examples=200)
def test_an_id_always_maps_to_the_same_shard(request_id: str) -> None:
    first = shard_index(request_id, SHARDS)
    assert 0 <= first < SHARDS
    assert shard_index(request_id, SHARDS) == first
    assert shard_index(request_id, 1) == 0


def test_a_cluster_puts_the_shards_on_different_masters(
    redis_client: redis.Redis, sharded: ShardedLedger
) -> None:
    if not isinstance(redis_client, redis.RedisCluster):
        pytest.skip("one server holds every shard; the cluster run checks the masters")
    masters = {shard.runner.placement()[1] for shard in sharded.shards}
    assert len(masters) == SHARDS


def test_keys_of_one_shard_are_refused_on_the_whole_queue(sharded: ShardedLedger) -> None:
    for name in ("records_key", "ready_key", "quarantine_key", "results_key", "keys", "runner"):
        with pytest.raises(LedgerError, match="shard_for"):
            getattr(sharded, name)
    with pytest.raises(LedgerError, match="3 shards"):
        sharded.run(None, [])
    assert sharded.shard_for("x") is sharded.shards[shard_index("x", SHARDS)]
    # It holds its shards' ledgers and is none of them: no member of one shard is its.
    assert not isinstance(sharded, Ledger)
    assert all(type(shard) is Ledger for shard in sharded.shards)
    for name in ("records_key", "runner", "scripts", "scan_page", "set_key_limits"):
        assert not hasattr(sharded, name)


def test_a_plain_ledger_is_its_own_single_shard(ledger: Ledger) -> None:
    assert ledger.shards == (ledger,)
    assert ledger.shard_for("anything") is ledger


# -- admission ------------------------------------------------------------------------------


def test_admission_is_idempotent_by_id_across_ledgers(
    sharded: ShardedLedger, sharded_factory: Callable[..., ShardedLedger]
) -> None:
    other = sharded_factory()
    ids = [f"r{i}" for i in range(60)]
    assert {a.status for a in sharded.admit_many((i, "p") for i in ids)} == {
        AdmissionStatus.ADMITTED
    }
    again = other.admit_many((i, "p") for i in ids)
    assert [a.request_id for a in again] == ids
    assert {a.status for a in again} == {AdmissionStatus.DUPLICATE}
    assert other.admit("r7", "other payload").status is AdmissionStatus.CONFLICT
    sizes = shard_sizes(sharded)
    assert sum(sizes) == 60 and all(sizes), sizes  # every shard holds some
    for request_id in ids:
        assert sharded.shard_for(request_id).resolve(request_id) is not None


def test_admit_many_answers_in_input_order_and_rejects_per_item(sharded: ShardedLedger) -> None:
    requests = [("a", "p"), ("", "p"), ("b", "x" * (sharded.max_payload_bytes + 1)), ("c", "p")]
    answers = sharded.admit_many(requests)
    assert [a.request_id for a in answers] == ["a", "", "b", "c"]
    assert [a.status for a in answers] == [
        AdmissionStatus.ADMITTED,
        AdmissionStatus.REJECTED,
        AdmissionStatus.REJECTED,
        AdmissionStatus.ADMITTED,
    ]
    assert answers[2].reason == "payload_too_large"


def test_a_bad_item_anywhere_writes_nothing_on_any_shard(sharded: ShardedLedger) -> None:
    good = [(request_id, "p") for request_id in ids_of_shard(0, 3) + ids_of_shard(2, 3)]
    with pytest.raises(TypeError, match="payload must be a str"):
        sharded.admit_many([*good, ("z", 42)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="pair"):
        sharded.admit_many([*good, ("lonely",)])  # type: ignore[list-item]
    assert shard_sizes(sharded) == [0, 0, 0]


def test_max_records_is_shared_out_between_the_shards(
    sharded_factory: Callable[..., ShardedLedger],
) -> None:
    ledger = sharded_factory(max_records=6)  # 2 per shard
    assert [shard.max_records for shard in ledger.shards] == [2, 2, 2]
    answers = ledger.admit_many((request_id, "p") for request_id in ids_of_shard(1, 3))
    assert [a.status for a in answers][:2] == [AdmissionStatus.ADMITTED] * 2
    assert (answers[2].status, answers[2].reason) == (AdmissionStatus.FULL, "max_records")
    assert ledger.admit(ids_of_shard(0, 1)[0], "p").status is AdmissionStatus.ADMITTED


# -- claims -------------------------------------------------------------------------------


def test_claims_drain_every_shard_each_id_once(sharded: ShardedLedger) -> None:
    ids = [f"r{i}" for i in range(90)]
    sharded.admit_many((i, "p") for i in ids)
    claimed: Counter[str] = Counter()
    while True:
        claims = sharded.claim_many("w", 7)
        if not claims:
            break
        claimed.update(claim.request_id for claim in claims)
        settled = sharded.settle_many((claim, State.COMPLETED) for claim in claims)
        assert {s.status for s in settled} == {SettlementStatus.SETTLED}
    assert claimed == Counter(ids)
    stats = sharded.stats()
    assert (stats.completed, stats.pending, stats.claimed) == (90, 0, 0)


def test_settle_and_claim_drains_the_queue_one_at_a_time(sharded: ShardedLedger) -> None:
    ids = [f"r{i}" for i in range(30)]
    sharded.admit_many((i, "p") for i in ids)
    done: list[str] = []
    claims = sharded.claim_many("w", 1)
    while claims:
        done += [claim.request_id for claim in claims]
        settled, claims = sharded.settle_and_claim(
            [(claim, State.COMPLETED) for claim in claims], "w", 1
        )
        assert [s.status for s in settled] == [SettlementStatus.SETTLED]
    assert sorted(done) == sorted(ids)
    assert sharded.stats().completed == 30


def test_a_busy_shard_does_not_starve_the_others(sharded: ShardedLedger) -> None:
    """Shard 0 gets a new record for every one done; the other shards are still served."""
    busy = iter(ids_of_shard(0, 400, prefix="busy"))
    waiting = ids_of_shard(1, 2, prefix="w") + ids_of_shard(2, 2, prefix="w")
    sharded.admit_many((next(busy), "p") for _ in range(5))
    sharded.admit_many((request_id, "p") for request_id in waiting)
    served: set[str] = set()
    claims = sharded.claim_many("w", 1)
    for _ in range(200):
        served.update(claim.request_id for claim in claims)
        sharded.admit(next(busy), "p")
        _, claims = sharded.settle_and_claim([(claim, State.COMPLETED) for claim in claims], "w", 1)
    assert set(waiting) <= served


def test_settle_and_claim_routes_each_settlement_to_its_shard(sharded: ShardedLedger) -> None:
    sharded.admit_many((f"r{i}", "p") for i in range(20))
    claims = sharded.claim_many("w", 20)
    assert len(claims) == 20
    items = [(claim, State.COMPLETED if n % 2 else State.FAILED) for n, claim in enumerate(claims)]
    settled, more = sharded.settle_and_claim(items, "w", 5)
    assert [s.record.request_id for s in settled if s.record] == [c.request_id for c in claims]
    assert more == []
    stats = sharded.stats()
    assert (stats.completed, stats.failed) == (10, 10)


def test_renew_and_release_route_by_id(sharded: ShardedLedger) -> None:
    sharded.admit_many((f"r{i}", "p") for i in range(12))
    claims = sharded.claim_many("w", 12)
    before = [claim.lease_until for claim in claims]
    renewed = sharded.renew_many((claim, 120) for claim in claims)
    assert {s.status for s in renewed} == {SettlementStatus.RENEWED}
    assert all(c.lease_until > b for c, b in zip(claims, before, strict=True))
    released = sharded.release(claims)
    assert {s.status for s in released} == {SettlementStatus.SETTLED}
    records = sharded.resolve_many(claim.request_id for claim in claims)
    assert {(r.state, r.attempts) for r in records if r} == {(State.PENDING, 0)}


def test_results_come_back_in_input_order(sharded: ShardedLedger) -> None:
    ids = [f"r{i}" for i in range(9)]
    sharded.admit_many((i, "p") for i in ids)
    claims = sharded.claim_many("w", 9)
    sharded.settle_many((c, State.COMPLETED, 0, f"out-{c.request_id}") for c in claims)
    asked = [*reversed(ids), "never"]
    assert sharded.results(asked) == [f"out-{i}".encode() for i in reversed(ids)] + [None]
    assert [r.request_id if r else None for r in sharded.resolve_many(asked)] == [
        *reversed(ids),
        None,
    ]


# -- against one shard ----------------------------------------------------------------------------

OPS = st.lists(
    st.tuples(
        st.sampled_from(["admit", "claim", "complete", "fail", "retry"]),
        st.integers(min_value=0, max_value=11),
    ),
    max_size=40,
)


@given(ops=OPS)
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_a_sharded_queue_answers_like_one_shard(
    ops: list[tuple[str, int]],
    ledger_factory: Callable[..., Ledger],
    sharded_factory: Callable[..., ShardedLedger],
) -> None:
    """The same operations by id on one shard and on three give the same states.

    Claims take everything due from both, so which records are claimed does not depend
    on the order a claim visits the shards in.
    """
    run = uuid.uuid4().hex[:12]  # each example on queues of its own
    one, three = ledger_factory(queue=f"one{run}"), sharded_factory(queue=f"three{run}")
    held: dict[int, dict[str, Any]] = {0: {}, 1: {}}
    for op, n in ops:
        request_id = f"r{n}"
        answers = []
        for side, target in enumerate((one, three)):
            if op == "admit":
                answers.append(target.admit(request_id, f"p{n}").status)
            elif op == "claim":
                got = target.claim_many("w", 100)
                held[side].update({claim.request_id: claim for claim in got})
                answers.append(sorted(claim.request_id for claim in got))
            elif request_id in held[side]:
                claim = held[side].pop(request_id)
                state = {"complete": State.COMPLETED, "fail": State.FAILED}.get(op, State.PENDING)
                answers.append(target.settle(claim, state).status)
            else:
                answers.append(None)
        assert answers[0] == answers[1], (op, request_id)
    for n in range(12):
        a, b = one.resolve(f"r{n}"), three.resolve(f"r{n}")
        assert (a and (a.state, a.attempts, a.payload)) == (b and (b.state, b.attempts, b.payload))


def test_a_repair_cycle_pages_through_large_shards(sharded: ShardedLedger) -> None:
    sharded.admit_many((f"r{i}", "p") for i in range(2400))  # each past 512: no listpack
    reports = list(sharded.repair_cycle(count=50))
    cursors = [r.cursor for r in reports]
    assert cursors[-1] == "0"
    assert {c.split(".")[0] for c in cursors[:-1]} == {"0", "1", "2"}
    assert any(not c.endswith(".0") for c in cursors[:-1])  # pages inside a shard
    assert sum(r.scanned for r in reports) >= 2400  # HSCAN may return a record twice


def test_claimers_take_different_home_shards_and_keep_to_them(
    sharded_factory: Callable[..., ShardedLedger],
) -> None:
    """Three workers of a 3-shard queue each drain their own shard (their own master)."""
    claimers = [sharded_factory() for _ in range(3)]
    claimers[0].admit_many((f"r{i}", "p") for i in range(150))
    homes = []
    for claimer in claimers:
        taken: Counter[int] = Counter()
        claims: list[Any] = []
        for _ in range(5):  # fewer calls than a rotation period (4 N = 12): at most one visit
            _, claims = claimer.settle_and_claim(
                [(claim, State.COMPLETED) for claim in claims], "w", 5
            )
            taken.update(shard_index(claim.request_id, SHARDS) for claim in claims)
        home, most = taken.most_common(1)[0]
        assert most >= 20, taken  # four of five calls at home
        homes.append(home)
    assert sorted(homes) == [0, 1, 2]


def test_a_bad_settlement_anywhere_writes_nothing_on_any_shard(sharded: ShardedLedger) -> None:
    sharded.admit_many((f"r{i}", "p") for i in range(12))
    claims = sharded.claim_many("w", 12)
    assert len({shard_index(c.request_id, SHARDS) for c in claims}) == 3
    items: list[Any] = [(claim, State.COMPLETED) for claim in claims]
    for bad in ((claims[0], "NOPE"), ("not a claim", State.COMPLETED), (claims[0],)):
        with pytest.raises((TypeError, ValueError)):
            sharded.settle_and_claim([*items, bad], "w", 5)
        with pytest.raises((TypeError, ValueError)):
            sharded.settle_many([*items, bad])
    stats = sharded.stats()
    assert (stats.claimed, stats.completed) == (12, 0)
