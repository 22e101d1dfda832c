"""``durability_replicas``: each write waits (``WAIT``) until replicas have it, on its own node.

Real replication only: a standalone master with a replica of the test's own, and a
cluster with one replica per master. Right after a write returns, the replica is read
directly: what ``WAIT`` acknowledged is there.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from django_ledger import Ledger, LedgerUnavailable
from django_ledger.core.errors import NotReplicated
from django_ledger.core.records import State
from django_ledger.core.results import AdmissionStatus, SettlementStatus
from tests.support.cluster_server import LocalCluster
from tests.support.redis_server import RedisServer
from tests.support.replication import master_and_replica as replicated_pair

MODES = [pytest.param(True, id="optimized"), pytest.param(False, id="reference")]


@pytest.fixture
def master_and_replica() -> Iterator[tuple[RedisServer, RedisServer]]:
    with replicated_pair() as pair:
        yield pair


@pytest.fixture(scope="module")
def replicated_cluster() -> Iterator[LocalCluster]:
    with LocalCluster(3, replicas=1) as cluster:
        yield cluster


@pytest.mark.parametrize("optimized", MODES)
def test_a_write_is_on_the_replica_when_the_call_returns(
    master_and_replica: tuple[RedisServer, RedisServer], optimized: bool
) -> None:
    master, replica = master_and_replica
    client = master.client()
    ledger = Ledger(
        client, "ns", "q", optimized=optimized, durability_replicas=1, durability_timeout_ms=5000
    )
    with replica.client() as on_replica:
        assert ledger.admit("a", "payload").status is AdmissionStatus.ADMITTED
        assert on_replica.hget(ledger.records_key, "a") == client.hget(ledger.records_key, "a")
        claim = ledger.claim("worker")
        assert claim is not None
        assert on_replica.zscore(ledger.leases_key, "a") is not None
        assert ledger.settle(claim).status is SettlementStatus.SETTLED
        assert on_replica.hget(ledger.records_key, "a") == client.hget(ledger.records_key, "a")
        ledger.close_gate()
        assert on_replica.exists(ledger.gate_key)
        ledger.open_gate()
        assert not on_replica.exists(ledger.gate_key)
    client.close()


@pytest.mark.parametrize("optimized", MODES)
def test_without_enough_replicas_a_write_is_not_replicated_but_applied(
    redis_server: RedisServer, namespace: str, optimized: bool
) -> None:
    # The suite's own server has no replica: WAIT 1 ends its time-out with none.
    client = redis_server.client()
    ledger = Ledger(
        client, namespace, "q", optimized=optimized, durability_replicas=1, durability_timeout_ms=20
    )
    with pytest.raises(NotReplicated, match="on the master but only 0 of 1 replica") as caught:
        ledger.admit("a", "payload")
    assert isinstance(caught.value, LedgerUnavailable)  # safe to retry, like any outage
    assert (caught.value.acknowledged, caught.value.wanted) == (0, 1)
    record = ledger.resolve("a")
    assert record is not None and record.state is State.PENDING  # applied on the master
    with pytest.raises(NotReplicated):
        ledger.close_gate()
    assert ledger.gate_closed
    # Reads never wait.
    assert ledger.stats().total == 1 and ledger.server_time_ms() > 0
    client.close()


def test_durability_off_sends_no_wait(redis_server: RedisServer, namespace: str) -> None:
    client = redis_server.client()
    ledger = Ledger(client, namespace, "q")
    waits = int(client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))
    ledger.admit("a", "payload")
    ledger.close_gate()
    after = int(client.info("commandstats").get("cmdstat_wait", {}).get("calls", 0))
    assert after == waits
    client.close()


@pytest.mark.parametrize("optimized", MODES)
def test_on_a_cluster_each_write_waits_on_its_own_master(
    replicated_cluster: LocalCluster, optimized: bool
) -> None:
    client = replicated_cluster.client()
    try:
        for master in replicated_cluster.masters():
            queue = replicated_cluster.queue_on(master, "durable", stem=f"q{int(optimized)}-")
            ledger = Ledger(
                client,
                "durable",
                queue,
                optimized=optimized,
                durability_replicas=1,
                durability_timeout_ms=5000,
            )
            (replica,) = replicated_cluster.replicas_of(master)
            with replica.client() as on_replica:
                on_replica.execute_command("READONLY")  # a cluster replica serves reads so
                assert ledger.admit("a", "payload").status is AdmissionStatus.ADMITTED
                assert on_replica.hget(ledger.records_key, "a") is not None
                claim = ledger.claim("worker")
                assert claim is not None
                assert ledger.settle(claim).status is SettlementStatus.SETTLED
                stored = on_replica.hget(ledger.records_key, "a")
                assert stored == client.hget(ledger.records_key, "a")
    finally:
        for key in client.scan_iter(match="{durable:*"):
            client.delete(key)
        client.close()


def test_on_a_cluster_too_few_replicas_is_not_replicated() -> None:
    with LocalCluster(3) as bare:
        client = bare.client()
        ledger = Ledger(client, "ns", "q", durability_replicas=1, durability_timeout_ms=20)
        with pytest.raises(NotReplicated):
            ledger.admit("a", "payload")
        assert ledger.resolve("a") is not None
        client.close()


def test_bad_durability_arguments_are_refused(redis_client: redis.Redis) -> None:
    with pytest.raises(TypeError, match="durability_replicas"):
        Ledger(redis_client, "ns", "q", durability_replicas=True)
    with pytest.raises(ValueError, match="durability_replicas"):
        Ledger(redis_client, "ns", "q", durability_replicas=-1)
    with pytest.raises(ValueError, match="durability_timeout_ms"):
        Ledger(redis_client, "ns", "q", durability_timeout_ms=0)
