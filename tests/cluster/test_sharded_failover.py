"""One shard's master killed (SIGKILL) under load: only that shard's calls wait.

A sharded queue (three shards, one per master, a replica each) with every write
WAITing for its replica. A producer admits ids in order and, when an admission fails,
keeps the id for later and goes on with the next; a worker claims and settles. The
master of shard 1 is killed mid-stream. What must hold:

* only calls on the killed shard see ``LedgerUnavailable``, never another exception:
  ids of the other shards keep being admitted while the replica takes over;
* every acknowledged admission and settlement is there afterwards.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from redis.crc import key_slot

from django_ledger import LedgerUnavailable, SettlementStatus, State
from django_ledger.connections import CLUSTER_RETRIES, client_retry
from django_ledger.core.layout import shard_index
from django_ledger.core.sharded import ShardedLedger
from tests.support.cluster_server import LocalCluster

NAMESPACE = "shardfail"
WAIT_MS = 5000
DEADLINE = 120.0
DOOMED = 1  # the shard whose master is killed


@dataclass
class Seen:
    acknowledged: list[tuple[float, str]] = field(default_factory=list)
    errors: list[tuple[float, str]] = field(default_factory=list)
    unexpected: list[BaseException] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


@pytest.fixture
def replicated() -> Iterator[LocalCluster]:
    with LocalCluster(3, replicas=1, node_timeout_ms=2000) as cluster:
        yield cluster


def sharded_on(cluster: LocalCluster) -> ShardedLedger:
    # The ledger's own retry policy, as LEDGER['CONNECTION'] builds it (test_cluster_failover).
    client = cluster.client(
        socket_timeout=2, socket_connect_timeout=1, retry=client_retry(CLUSTER_RETRIES)
    )
    return ShardedLedger(
        client, NAMESPACE, "q", 3, durability_replicas=1, durability_timeout_ms=WAIT_MS
    )


def produce(ledger: ShardedLedger, seen: Seen, stop: threading.Event) -> None:
    number, later = 0, []
    while not stop.is_set():
        if later and number % 20 == 0:
            request_id = later.pop(0)  # an earlier failure, again: admission reconciles
        else:
            request_id, number = f"r{number:06d}", number + 1
        try:
            ledger.admit(request_id, "payload")
        except LedgerUnavailable:
            seen.errors.append((time.monotonic(), request_id))
            later.append(request_id)
            continue
        except Exception as exc:
            seen.unexpected.append(exc)
            continue
        seen.acknowledged.append((time.monotonic(), request_id))
    while later:  # after the failover every id goes in
        request_id = later.pop(0)
        try:
            ledger.admit(request_id, "payload")
        except LedgerUnavailable:
            later.append(request_id)
            time.sleep(0.05)
            continue
        seen.acknowledged.append((time.monotonic(), request_id))


def work(ledger: ShardedLedger, seen: Seen, stop: threading.Event) -> None:
    held = []
    while not stop.is_set():
        try:
            if not held:
                held = ledger.claim_many("worker", 8, lease=600)
                if not held:
                    stop.wait(0.01)
                    continue
            claim = held[0]
            settlement = ledger.settle(claim, State.COMPLETED)
        except LedgerUnavailable:
            stop.wait(0.05)
            continue  # the same claim again: a replayed COMPLETED answers SETTLED
        except Exception as exc:
            seen.unexpected.append(exc)
            continue
        held.pop(0)
        if settlement.status is SettlementStatus.SETTLED:
            seen.acknowledged.append((time.monotonic(), claim.request_id))
        else:
            seen.lost.append(claim.request_id)


def wait_until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_killed_shard_master_stops_only_that_shard(replicated: LocalCluster) -> None:
    producer_ledger, worker_ledger = sharded_on(replicated), sharded_on(replicated)
    shard = producer_ledger.shards[DOOMED]
    slot = key_slot(shard.records_key.encode())
    doomed = replicated.master_of_slot(slot)
    others = {
        replicated.master_of_slot(key_slot(s.records_key.encode())).port
        for i, s in enumerate(producer_ledger.shards)
        if i != DOOMED
    }
    assert doomed.port not in others  # one shard per master
    producer, worker = Seen(), Seen()
    stop = threading.Event()
    threads = [
        threading.Thread(target=produce, args=(producer_ledger, producer, stop), daemon=True),
        threading.Thread(target=work, args=(worker_ledger, worker, stop), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: len(producer.acknowledged) >= 300, "admissions before the kill")
        killed_at = time.monotonic()
        doomed.kill()
        replicated.wait_for_failover(slot, doomed)
        promoted_at = time.monotonic()
        doomed.restart()
        replicated.wait_until_healthy()
        count = len(producer.acknowledged)
        wait_until(lambda: len(producer.acknowledged) >= count + 300, "admissions after")
    finally:
        stop.set()
        for thread in threads:
            thread.join(DEADLINE)
    assert not any(thread.is_alive() for thread in threads)
    assert producer.unexpected == [] and worker.unexpected == []
    assert worker.lost == []
    assert producer.errors, "the kill interrupted nothing"
    # Only ids of the killed shard failed ...
    assert {shard_index(request_id, 3) for _, request_id in producer.errors} == {DOOMED}
    # ... and the other shards took admissions while its replica was taking over.
    during = [rid for at, rid in producer.acknowledged if killed_at < at < promoted_at]
    assert any(shard_index(rid, 3) != DOOMED for rid in during)

    admitted = sorted({rid for _, rid in producer.acknowledged})
    records = producer_ledger.resolve_many(admitted)
    assert [rid for rid, r in zip(admitted, records, strict=True) if r is None] == []
    settled = sorted({rid for _, rid in worker.acknowledged})
    records = producer_ledger.resolve_many(settled)
    assert all(r is not None and r.state is State.COMPLETED for r in records)
    for ledger in (producer_ledger, worker_ledger):
        ledger.redis.close()
