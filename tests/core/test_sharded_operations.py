"""Sharded queues as an operator meets them: stats, the gate, repair, import, and the
stored layout that holds a queue with records to its number of shards.

Every test runs in both modes (fused and reference), on one server and, in the cluster
run, on a 3-master cluster where the shards live on different masters.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

from django_ledger import AdmissionStatus, Ledger, State
from django_ledger.core.layout import LayoutMismatch, layout_key
from django_ledger.core.sharded import ShardedLedger
from tests.core.test_sharded import SHARDS, ids_of_shard, shard_sizes
from tests.support.ledger_helpers import corrupt

pytest_plugins = ["tests.support.ledger_fixtures"]


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


def test_stats_sum_the_shards(sharded: ShardedLedger) -> None:
    sharded.admit_many((f"r{i}", "p") for i in range(15))
    sharded.admit("later", "p", delay=3600)
    claims = sharded.claim_many("w", 4)
    sharded.settle_many((c, State.COMPLETED) for c in claims[:2])
    stats = sharded.stats()
    assert stats.total == 16
    assert (stats.pending_due, stats.pending_later, stats.claimed, stats.completed) == (
        11,
        1,
        2,
        2,
    )
    parts = [shard.stats() for shard in sharded.shards]
    assert stats.oldest_due_at == min(p.oldest_due_at for p in parts if p.oldest_due_at)


def test_the_gate_closes_every_shard(sharded: ShardedLedger) -> None:
    sharded.admit_many((f"r{i}", "p") for i in range(9))
    sharded.close_gate()
    assert sharded.gate_closed and all(shard.gate_closed for shard in sharded.shards)
    assert sharded.claim_many("w", 9) == []
    assert sharded.stats().gate_closed
    sharded.open_gate()
    assert not sharded.gate_closed
    assert len(sharded.claim_many("w", 9)) == 9
    sharded.shards[2].close_gate()  # one shard closed: the queue says so
    assert sharded.gate_closed


def test_a_repair_cycle_visits_every_shard(sharded: ShardedLedger) -> None:
    sharded.admit_many((f"r{i}", "p") for i in range(30))
    victim = ids_of_shard(2, 1, prefix="bad")[0]
    sharded.admit(victim, "p")
    corrupt(sharded.shards[2], victim)
    reports = list(sharded.repair_cycle(count=5))
    assert reports[-1].cursor == "0"
    assert all(r.cursor.count(".") == 1 for r in reports[:-1])
    # small hashes answer in one HSCAN page: then each page ends its shard
    assert [r.cursor for r in reports] == ["1.0", "2.0", "0"]
    assert sum(r.scanned for r in reports) == 31
    assert sum(r.quarantined for r in reports) == 1
    assert sharded.stats().quarantined == 1
    with pytest.raises(ValueError, match="cursor"):
        sharded.repair_page("3.0")
    with pytest.raises(ValueError, match="cursor"):
        sharded.repair_page("x.1")


def test_a_shard_cursor_past_64_bits_is_refused_before_anything_is_written(
    sharded: ShardedLedger, redis_client: redis.Redis
) -> None:
    sharded.admit_many((f"r{i}", "p") for i in range(6))
    assert len(sharded.claim_many("w", 6, lease=1)) == 6
    sharded.clock_skew_ms = 5_000  # every lease has run out: a sweep would write
    keys = [key for shard in sharded.shards for key in shard.keys]
    before = {key: redis_client.dump(key) for key in keys}
    with pytest.raises(ValueError, match="cursor must be a cursor returned by repair"):
        sharded.repair_page(f"1.{2**64}")
    assert {key: redis_client.dump(key) for key in keys} == before  # no sweep either
    assert sharded.repair_page(f"1.{2**64 - 1}").expired == 6  # the largest is a cursor


def test_every_repair_page_repairs_expired_leases_in_every_shard(sharded: ShardedLedger) -> None:
    sharded.admit_many((f"r{i}", "p") for i in range(12))
    claims = sharded.claim_many("w", 12, lease=1)
    assert {sharded.shards.index(sharded.shard_for(c.request_id)) for c in claims} == {0, 1, 2}
    sharded.clock_skew_ms = 5_000
    report = sharded.repair_page("0", count=100)  # a page of shard 0 alone
    assert report.expired == 12
    assert sharded.stats().pending_due == 12


def test_import_routes_each_record_to_its_shard_and_checks_all_first(
    sharded: ShardedLedger,
) -> None:
    now = sharded.server_time_ms()
    rows = [
        {"request_id": f"i{n}", "payload": "p", "state": State.PENDING, "due_at": now}
        for n in range(12)
    ]
    sharded.close_gate()
    with pytest.raises(ValueError):
        sharded.import_many([*rows, {"request_id": "bad", "payload": "p", "state": "NOPE"}])
    assert shard_sizes(sharded) == [0, 0, 0]
    answers = sharded.import_many(rows)
    assert {a.status for a in answers} == {AdmissionStatus.ADMITTED}
    for row in rows:
        record = sharded.shard_for(row["request_id"]).resolve(row["request_id"])
        assert record is not None and record.state is State.PENDING


# -- the stored layout ----------------------------------------------------------------------------


def test_a_queue_with_records_refuses_another_number_of_shards(
    sharded: ShardedLedger,
    sharded_factory: Callable[..., ShardedLedger],
    ledger_factory: Callable[..., Ledger],
    redis_client: redis.Redis,
    namespace: str,
) -> None:
    sharded.check_layout()
    assert redis_client.get(layout_key(namespace, "q")) == b"3"
    sharded.admit("r1", "p")
    with pytest.raises(LayoutMismatch, match="holds records in 3 shard"):
        ledger_factory().check_layout()
    with pytest.raises(LayoutMismatch, match="Set SHARDS back to 3"):
        sharded_factory(2).check_layout()
    sharded.check_layout()  # the same number passes


def test_an_unsharded_queue_with_records_refuses_shards(
    ledger_factory: Callable[..., Ledger], sharded_factory: Callable[..., ShardedLedger]
) -> None:
    plain = ledger_factory()
    plain.check_layout()
    plain.admit("r1", "p")
    with pytest.raises(LayoutMismatch, match="in 1 shard"):
        sharded_factory().check_layout()


def test_ledgers_configured_alike_that_start_together_never_refuse_each_other(
    sharded_factory: Callable[..., ShardedLedger],
) -> None:
    # Four processes' ledgers of 3 shards, new on a fresh queue, each admitting at once.
    # One may read no layout key, then find the records another admitted after writing
    # it: it reads the key again rather than refuse (before: about 1 round in 20).
    refused: list[LayoutMismatch] = []
    for round_number in range(100):
        ledgers = [sharded_factory(queue=f"together-{round_number}") for _ in range(4)]
        start = threading.Barrier(len(ledgers))

        def admit(ledger: ShardedLedger, who: int, start: threading.Barrier) -> None:
            start.wait()
            try:
                for k in range(4):
                    ledger.admit(f"id-{who}-{k}", "p")
            except LayoutMismatch as exc:
                refused.append(exc)

        threads = [
            threading.Thread(target=admit, args=(ledger, who, start))
            for who, ledger in enumerate(ledgers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert refused == [], f"round {round_number}"
        assert ledgers[0].stats().total == 16  # every admission in, on the one layout


def test_an_empty_queue_may_change_its_number_of_shards(
    sharded: ShardedLedger,
    sharded_factory: Callable[..., ShardedLedger],
    ledger_factory: Callable[..., Ledger],
    redis_client: redis.Redis,
    namespace: str,
) -> None:
    sharded.check_layout()
    sharded_factory(5).check_layout()
    assert redis_client.get(layout_key(namespace, "q")) == b"5"
    ledger_factory().check_layout()  # back to one: the key goes
    assert redis_client.get(layout_key(namespace, "q")) is None
