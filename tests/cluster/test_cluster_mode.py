"""The suite's cluster mode and its local clusters: what they start and hand out."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings
from redis.cluster import RedisCluster

from django_ledger.conf import get_ledger, reset_connections
from tests.support.cluster_server import LocalCluster, find_cli
from tests.support.redis_plugin import session_cluster
from tests.support.redis_server import FORBIDDEN_PORT, delete_namespace


@pytest.fixture
def cluster_mode(pytestconfig: pytest.Config) -> LocalCluster:
    own = session_cluster(pytestconfig)
    if own is None:
        pytest.skip("cluster mode only (tox -e cluster, or LEDGER_TEST_CLUSTER=1)")
    return own


def test_cluster_mode_points_the_ledger_and_the_client_at_its_cluster(
    cluster_mode: LocalCluster, redis_client: redis.Redis, namespace: str
) -> None:
    assert isinstance(redis_client, RedisCluster)
    assert os.environ["REDIS_CLUSTER"] == ",".join(cluster_mode.startup_nodes)
    assert settings.LEDGER["CONNECTION"] == {"CLUSTER": cluster_mode.startup_nodes}
    assert len(cluster_mode.masters()) == 3
    assert FORBIDDEN_PORT not in {node.port for node in cluster_mode.nodes}
    reset_connections()
    ledger = get_ledger()
    assert isinstance(ledger.redis, RedisCluster)
    ledger.admit("a", "payload")
    owner = cluster_mode.master_of(ledger.records_key)
    with owner.client() as client:
        assert client.hexists(ledger.records_key, "a")
    reset_connections()


@pytest.fixture
def cluster_keys_left_behind(cluster: LocalCluster) -> Iterator[list[str]]:
    # Requested before `namespace`, so it tears down after it: it sees what is left.
    names: list[str] = []
    yield names
    with cluster.client() as client:
        for name in names:
            assert list(client.scan_iter(match=f"*{name}*")) == []


def test_the_namespace_fixture_cleans_the_cluster(
    cluster_mode: LocalCluster, cluster_keys_left_behind: list[str], namespace: str
) -> None:
    cluster_keys_left_behind.append(namespace)
    with cluster_mode.client() as client:
        for queue in ("a", "b", "c", "d", "e"):  # hash tags on more than one master
            client.hset(f"{{{namespace}:{queue}}}:records", "x", "y")


def test_delete_namespace_reaches_every_master(cluster: LocalCluster) -> None:
    tags = [cluster.queue_on(master, "clean") for master in cluster.masters()]
    with cluster.client() as client:
        for tag in tags:
            client.set(f"{{clean:{tag}}}:records", "x")
        client.set("clean:plain", "x")
        assert delete_namespace(client, "clean") == len(tags) + 1
        assert list(client.scan_iter(match="*clean*")) == []


@pytest.mark.parametrize("use_cli", [True, False], ids=["redis-cli", "commands"])
def test_a_cluster_with_replicas_forms_either_way(use_cli: bool) -> None:
    if use_cli and find_cli() is None:
        pytest.skip("no redis-cli here: clusters form with CLUSTER commands")
    with LocalCluster(3, replicas=1, use_cli=use_cli) as formed:
        masters = formed.masters()
        assert len(masters) == 3 and len(formed.nodes) == 6
        assert all(len(formed.replicas_of(master)) == 1 for master in masters)
        served = formed.slot_ranges()
        assert set(served) == {master.port for master in masters}
        assert sum(high - low + 1 for ranges in served.values() for low, high in ranges) == 16384
        with formed.client() as client:
            client.set("k", "v")
            assert client.get("k") == b"v"
    assert all(not node.running for node in masters)
