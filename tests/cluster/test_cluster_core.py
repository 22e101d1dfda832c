"""The core on a real 3-master Redis Cluster: both paths on every master, the clock of
the queue's own master, and redis-py's cluster errors in the ledger's terms.

These run in every mode: on cluster mode's own cluster, or on one this process starts.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from django_ledger import Ledger, LedgerError, LedgerUnavailable
from django_ledger.core.records import State
from django_ledger.core.results import AdmissionStatus, SettlementStatus
from django_ledger.core.transport import Translate, unavailable
from tests.support.cluster_server import LocalCluster
from tests.support.ledger_helpers import count_calls, load_scripts
from tests.support.redis_server import RedisServer, delete_namespace

MODES = [pytest.param(True, id="optimized"), pytest.param(False, id="reference")]


@pytest.fixture
def cluster_client(cluster: LocalCluster) -> Iterator[RedisCluster]:
    client = cluster.client()
    yield client
    client.close()


@pytest.fixture
def cluster_namespace(cluster: LocalCluster, namespace: str) -> Iterator[str]:
    """The test's namespace, its keys deleted from the cluster too (outside cluster mode)."""
    yield namespace
    with cluster.client() as client:
        delete_namespace(client, namespace)


def fcall_calls(node: RedisServer) -> int:
    with node.client() as client:
        stats = client.info("commandstats")
    return int(stats.get("cmdstat_fcall", {}).get("calls", 0))


@pytest.mark.parametrize("optimized", MODES)
def test_every_operation_works_on_every_master(
    cluster: LocalCluster, cluster_client: RedisCluster, cluster_namespace: str, optimized: bool
) -> None:
    masters = cluster.masters()
    assert len(masters) == 3
    for master in masters:
        queue = cluster.queue_on(master, cluster_namespace)
        ledger = Ledger(cluster_client, cluster_namespace, queue, optimized=optimized)
        assert cluster.master_of(ledger.records_key) is master
        assert [a.status for a in ledger.admit_many([("a", "1"), ("b", "2"), ("c", "3")])] == [
            AdmissionStatus.ADMITTED
        ] * 3
        assert ledger.admit("a", "1").status is AdmissionStatus.DUPLICATE
        assert ledger.admit("a", "other").status is AdmissionStatus.CONFLICT
        first, second, third = ledger.claim_many("worker", 3, lease=60)
        assert ledger.renew(first, lease=120).status is SettlementStatus.RENEWED
        assert ledger.settle(first).status is SettlementStatus.SETTLED
        assert ledger.settle(second, State.PENDING).status is SettlementStatus.SETTLED
        settled, claims = ledger.settle_and_claim([(third, State.FAILED)], "worker", 1)
        assert [s.status for s in settled] == [SettlementStatus.SETTLED]
        assert [c.request_id for c in claims] == [second.request_id]
        assert [s.status for s in ledger.release(claims)] == [SettlementStatus.SETTLED]
        stats = ledger.stats()
        assert (stats.pending_due, stats.completed, stats.failed) == (1, 1, 1)
        assert sum(1 for _ in ledger.repair_cycle()) >= 1
        ledger.close_gate()
        assert ledger.claim("worker") is None
        assert ledger.import_record("d", "4", State.PENDING, 0).status is AdmissionStatus.ADMITTED
        ledger.open_gate()
        assert [r.state if r else None for r in ledger.resolve_many(["a", "b", "c", "d"])] == [
            State.COMPLETED,
            State.PENDING,
            State.FAILED,
            State.PENDING,
        ]


@pytest.mark.parametrize("optimized", MODES)
def test_the_clock_is_read_on_the_queues_own_master(
    cluster: LocalCluster, cluster_client: RedisCluster, cluster_namespace: str, optimized: bool
) -> None:
    masters = cluster.masters()
    for master in masters:
        ledger = Ledger(
            cluster_client,
            cluster_namespace,
            cluster.queue_on(master, cluster_namespace),
            optimized=optimized,
        )
        load_scripts(master.client())
        before = {node.port: fcall_calls(node) for node in masters}
        assert ledger.server_time_ms() > 0
        assert ledger.runner.now_and_raw("missing")[1] is None
        after = {node.port: fcall_calls(node) for node in masters}
        # One script call each, both on the queue's master; none elsewhere (a bare TIME
        # would have gone to redis-py's default node).
        assert {port: after[port] - before[port] for port in after} == {
            node.port: 2 if node is master else 0 for node in masters
        }


def test_count_calls_sums_every_master(
    cluster: LocalCluster, cluster_client: RedisCluster, cluster_namespace: str
) -> None:
    # The helper the round-trip tests count with, in cluster mode: one script call on
    # each master, three in all, however the slots are spread.
    ledgers = [
        Ledger(cluster_client, cluster_namespace, cluster.queue_on(master, cluster_namespace))
        for master in cluster.masters()
    ]
    with count_calls(cluster_client) as calls:
        for ledger in ledgers:
            ledger.admit("a", "payload")
    assert calls.fcall == len(ledgers) == 3


def test_now_and_raw_reads_the_record_with_the_clock(
    cluster_client: RedisCluster, cluster_namespace: str
) -> None:
    ledger = Ledger(cluster_client, cluster_namespace, "clock", optimized=False)
    ledger.admit("a", "payload")
    now, raw = ledger.runner.now_and_raw("a")
    assert raw == cluster_client.hget(ledger.records_key, "a")
    assert now >= ledger.resolve("a").created_at  # type: ignore[union-attr]
    ledger.clock_skew_ms = 3_600_000
    assert ledger.server_time_ms() >= now + 3_600_000


def test_a_call_the_cluster_client_refuses_is_a_ledger_error(
    cluster_client: RedisCluster, cluster_namespace: str
) -> None:
    ledger = Ledger(cluster_client, cluster_namespace, "refused")
    with pytest.raises(LedgerError) as caught, ledger.translate_errors():
        pipe = cluster_client.pipeline()
        pipe.time()  # redis-py refuses TIME in a cluster pipeline (RedisClusterException)
        pipe.execute()
    assert not isinstance(caught.value, LedgerUnavailable)
    assert isinstance(caught.value.__cause__, redis.exceptions.RedisClusterException)


def test_a_slot_without_a_master_is_unavailable_until_it_has_one() -> None:
    # A real CLUSTERDOWN: the slot of the queue's keys served by nobody, then again.
    with LocalCluster(1) as one:
        client = one.client()
        ledger = Ledger(client, "ns", "orphan")
        assert ledger.admit("a", "payload").status is AdmissionStatus.ADMITTED
        slot = key_slot(ledger.records_key.encode())
        node = one.nodes[0]
        with node.client() as raw:
            raw.execute_command("CLUSTER", "DELSLOTS", slot)
        try:
            with pytest.raises(LedgerUnavailable) as caught:
                ledger.stats()
            assert isinstance(
                caught.value.__cause__,
                redis.exceptions.ClusterDownError | redis.exceptions.RedisClusterException,
            )
        finally:
            with node.client() as raw:
                raw.execute_command("CLUSTER", "ADDSLOTS", slot)
            one.wait_until_healthy()
        assert ledger.admit("a", "payload").status is AdmissionStatus.DUPLICATE
        client.close()


@pytest.mark.parametrize(
    "error",
    [
        redis.exceptions.ClusterDownError("CLUSTERDOWN The cluster is down"),
        redis.exceptions.MasterDownError("MASTERDOWN Link with MASTER is down"),
        redis.exceptions.TryAgainError("TRYAGAIN Multiple keys request during rehashing"),
        redis.exceptions.MovedError("3999 127.0.0.1:6381"),
        redis.exceptions.AskError("3999 127.0.0.1:6381"),
        redis.exceptions.ClusterError("TTL exhausted."),
        redis.exceptions.SlotNotCoveredError('Slot "3999" is not covered by the cluster.'),
        redis.ConnectionError("Connection refused"),
        redis.TimeoutError("Timeout reading from socket"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_redis_py_errors_of_a_failover_are_unavailable(error: Exception) -> None:
    assert unavailable(error)
    with pytest.raises(LedgerUnavailable) as caught, Translate("queue"):
        raise error
    assert caught.value.__cause__ is error


def test_a_cluster_that_cannot_be_reached_is_unavailable_with_its_cause() -> None:
    cause = redis.ConnectionError("Connection refused")
    try:
        try:
            raise cause
        except redis.ConnectionError as exc:
            raise redis.exceptions.RedisClusterException(
                "Redis Cluster cannot be connected. Please provide at least one reachable node"
            ) from exc
    except redis.exceptions.RedisClusterException as exc:
        error = exc
    assert unavailable(error)
    with pytest.raises(LedgerUnavailable) as caught, Translate("queue"):
        raise error
    assert caught.value.__cause__ is error


@pytest.mark.parametrize(
    "error",
    [
        redis.exceptions.RedisClusterException("ERROR: Calling pipelined function time is blocked"),
        redis.exceptions.ClusterCrossSlotError(),
        redis.ResponseError("ERR wrong number of arguments"),
    ],
    ids=lambda error: type(error).__name__,
)
def test_a_refusal_is_a_ledger_error_not_unavailable(error: Exception) -> None:
    assert not unavailable(error)
    with pytest.raises(LedgerError) as caught, Translate("queue"):
        raise error
    assert not isinstance(caught.value, LedgerUnavailable)
    assert caught.value.__cause__ is error
