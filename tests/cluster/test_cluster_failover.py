"""A queue's master killed (SIGKILL) under load, on a cluster with a replica per master.

A producer admits and a worker claims and settles, each on its own cluster client, with
``durability_replicas=1`` (every write WAITs for the replica). The master of the queue's
slot is killed mid-stream; its replica takes over; the old master comes back as a
replica of the new one. What must hold:

* the clients see ``LedgerUnavailable`` (``NotReplicated`` included), never another
  exception, and only from the kill until they have worked again on the new master;
* every admission and settlement that was acknowledged is there afterwards, and no
  acknowledged claim was lost (its settlement never answers LOST).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from redis.crc import key_slot

from django_ledger import Ledger, LedgerUnavailable
from django_ledger.connections import CLUSTER_RETRIES, client_retry
from django_ledger.core.records import State
from django_ledger.core.results import AdmissionStatus, Claim, SettlementStatus
from tests.support.cluster_server import LocalCluster

NAMESPACE = "failover"
#: Long enough that a loaded CI box never misses a WAIT before the kill.
WAIT_MS = 5000
DEADLINE = 120.0


@dataclass
class Client:
    """What one client loop saw: acknowledged ids, and each error with when it came."""

    name: str
    acknowledged: list[str] = field(default_factory=list)
    errors: list[tuple[float, BaseException]] = field(default_factory=list)
    unexpected: list[BaseException] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    last_success: float = 0.0

    def failed(self, exc: BaseException) -> None:
        if isinstance(exc, LedgerUnavailable):
            self.errors.append((time.monotonic(), exc))
        else:
            self.unexpected.append(exc)

    def succeeded(self) -> None:
        self.last_success = time.monotonic()


@pytest.fixture
def replicated() -> Iterator[LocalCluster]:
    with LocalCluster(3, replicas=1, node_timeout_ms=2000) as cluster:
        yield cluster


def ledger_on(cluster: LocalCluster, queue: str, optimized: bool) -> Ledger:
    # The ledger's own retry policy (one immediate resend), as LEDGER['CONNECTION'] builds
    # it: redis-py's default (since 8.2, ten resends with waits of up to a second) can
    # ride out the whole failover and hide it.
    client = cluster.client(
        socket_timeout=2, socket_connect_timeout=1, retry=client_retry(CLUSTER_RETRIES)
    )
    return Ledger(
        client,
        NAMESPACE,
        queue,
        optimized=optimized,
        durability_replicas=1,
        durability_timeout_ms=WAIT_MS,
    )


def produce(ledger: Ledger, seen: Client, stop: threading.Event) -> None:
    number = 0
    while not stop.is_set():
        request_id = f"r{number:06d}"
        try:
            status = ledger.admit(request_id, f"payload {number}").status
        except Exception as exc:
            seen.failed(exc)
            stop.wait(0.05)
            continue  # the same id again: admission reconciles by id
        if status not in (AdmissionStatus.ADMITTED, AdmissionStatus.DUPLICATE):
            seen.unexpected.append(AssertionError(f"{request_id} answered {status}"))
        seen.acknowledged.append(request_id)
        seen.succeeded()
        number += 1


def work(ledger: Ledger, seen: Client, stop: threading.Event) -> None:
    held: list[Claim] = []
    while not stop.is_set():
        try:
            if not held:
                held = ledger.claim_many("worker", 8, lease=600)
                if not held:
                    seen.succeeded()
                    stop.wait(0.01)
                    continue
            claim = held[0]
            settlement = ledger.settle(claim)
        except Exception as exc:
            seen.failed(exc)
            stop.wait(0.05)
            continue  # a claim in hand is settled again: a replayed COMPLETED answers SETTLED
        held.pop(0)
        if settlement.status is SettlementStatus.SETTLED:
            seen.acknowledged.append(claim.request_id)
        else:
            seen.lost.append(claim.request_id)
        seen.succeeded()


def wait_until(condition: Callable[[], bool], what: str, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


@pytest.mark.parametrize(
    "optimized", [pytest.param(True, id="optimized"), pytest.param(False, id="reference")]
)
def test_a_killed_master_loses_nothing_acknowledged(
    replicated: LocalCluster, optimized: bool
) -> None:
    doomed = replicated.masters()[0]
    queue = replicated.queue_on(doomed, NAMESPACE)
    producer_ledger = ledger_on(replicated, queue, optimized)
    worker_ledger = ledger_on(replicated, queue, optimized)
    slot = key_slot(producer_ledger.records_key.encode())
    producer, worker = Client("producer"), Client("worker")
    stop = threading.Event()
    threads = [
        threading.Thread(target=produce, args=(producer_ledger, producer, stop), daemon=True),
        threading.Thread(target=work, args=(worker_ledger, worker, stop), daemon=True),
    ]
    for thread in threads:
        thread.start()
    try:
        wait_until(
            lambda: len(producer.acknowledged) >= 200 and len(worker.acknowledged) >= 100,
            "admissions and settlements before the kill",
        )
        killed_at = time.monotonic()
        doomed.kill()  # SIGKILL: nothing is flushed, the replica gets nothing more
        promoted = replicated.wait_for_failover(slot, doomed)
        assert promoted is not doomed and promoted.running
        # The old master comes back (empty: no AOF) and joins as the new master's replica,
        # so WAIT 1 can be satisfied again.
        doomed.restart()
        replicated.wait_until_healthy()
        healthy_at = time.monotonic()
        wait_until(
            lambda: min(producer.last_success, worker.last_success) > healthy_at,
            "both clients to work on the new master",
        )
        back_at = max(producer.last_success, worker.last_success)
        before = (len(producer.acknowledged), len(worker.acknowledged))
        wait_until(
            lambda: (
                len(producer.acknowledged) >= before[0] + 200
                and len(worker.acknowledged) >= before[1] + 100
            ),
            "admissions and settlements after the failover",
        )
    finally:
        stop.set()
        for thread in threads:
            thread.join(DEADLINE)
    assert not any(thread.is_alive() for thread in threads)

    for seen in (producer, worker):
        assert seen.unexpected == [], f"{seen.name} saw {seen.unexpected!r}"
        assert seen.lost == [], f"{seen.name}: acknowledged claims were lost: {seen.lost}"
        # LedgerUnavailable only while the master was gone: none before the kill, none
        # once the client had worked on the new master.
        assert all(killed_at <= at <= back_at for at, _ in seen.errors), seen.errors
    assert producer.errors or worker.errors, "the kill interrupted nothing"

    admitted = producer.acknowledged
    records = producer_ledger.resolve_many(admitted)
    missing = [rid for rid, record in zip(admitted, records, strict=True) if record is None]
    assert missing == [], f"{len(missing)} acknowledged admissions were lost: {missing[:10]}"
    completed = sorted(set(worker.acknowledged))
    records = producer_ledger.resolve_many(completed)
    undone = [
        rid
        for rid, record in zip(completed, records, strict=True)
        if record is None or record.state is not State.COMPLETED
    ]
    assert undone == [], f"{len(undone)} acknowledged settlements were lost: {undone[:10]}"
    for ledger in (producer_ledger, worker_ledger):
        ledger.redis.close()
