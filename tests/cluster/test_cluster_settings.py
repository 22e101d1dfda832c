"""``LEDGER['DURABILITY']``: read into every ledger, checked (E016), and --deploy's W004."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django_redis.client import DefaultClient
from redis.cluster import RedisCluster

from django_ledger.checks import check_redis, check_settings
from django_ledger.conf import get_ledger, ledger_settings, reset_connections
from django_ledger.core.results import AdmissionStatus, SettlementStatus
from tests.support.cluster_server import LocalCluster
from tests.support.redis_server import RedisServer, delete_namespace

MEMORY = "django_ledger.core.dispatch.MemoryDispatchRegistry"


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


def config(url: str, **durability: Any) -> dict[str, Any]:
    return {
        "CONNECTION": url,
        "DISPATCH": {"BACKEND": MEMORY},
        **({"DURABILITY": durability} if durability else {}),
    }


def test_without_the_setting_no_write_waits(redis_server: RedisServer) -> None:
    with override_settings(LEDGER=config(redis_server.url)):
        ledger = get_ledger()
        assert (ledger.durability_replicas, ledger.durability_timeout_ms) == (0, 1000)
        assert (ledger.runner.durability_replicas, ledger.runner.durability_timeout_ms) == (0, 1000)


@pytest.mark.parametrize(
    ("timeout", "milliseconds"),
    [(2, 2000), (0.25, 250), (timedelta(milliseconds=1500), 1500), (0.0001, 1)],
)
def test_replicas_and_timeout_reach_every_ledger(
    redis_server: RedisServer, timeout: Any, milliseconds: int
) -> None:
    with override_settings(LEDGER=config(redis_server.url, REPLICAS=2, TIMEOUT=timeout)):
        assert ledger_settings.durability.replicas == 2
        ledger = get_ledger()
        assert (ledger.durability_replicas, ledger.durability_timeout_ms) == (2, milliseconds)


@pytest.mark.parametrize(
    ("durability", "id_"),
    [
        ({"REPLICAS": -1}, "E016"),
        ({"REPLICAS": 1.5}, "E016"),
        ({"REPLICAS": True}, "E016"),
        ({"REPLICAS": 101}, "E016"),
        ({"TIMEOUT": 0}, "E016"),
        ({"TIMEOUT": "1s"}, "E016"),
        ({"TIMEOUT": 7200}, "E016"),
        ({"REPLICA": 1}, "E002"),
        ("one", "E003"),
    ],
)
def test_a_bad_durability_setting_is_an_error(durability: Any, id_: str) -> None:
    with override_settings(LEDGER={"DURABILITY": durability}):
        messages = check_settings()
        assert [m.id for m in messages] == [f"django_ledger.{id_}"]
        assert messages[0].hint and "%(" not in messages[0].hint
        if id_ == "E016":
            with pytest.raises(ImproperlyConfigured, match=r"LEDGER\['DURABILITY'\]"):
                _ = ledger_settings.durability


def test_a_good_durability_setting_passes() -> None:
    with override_settings(LEDGER={"DURABILITY": {"REPLICAS": 1, "TIMEOUT": 0.5}}):
        assert check_settings() == []


def test_deploy_warns_when_a_master_has_fewer_replicas_than_asked(
    redis_server: RedisServer,
) -> None:
    with override_settings(LEDGER=config(redis_server.url, REPLICAS=1)):
        warnings = [m for m in check_redis() if m.id == "django_ledger.W004"]
    assert len(warnings) == 1 and "0 connected replica(s)" in warnings[0].msg
    with override_settings(LEDGER=config(redis_server.url)):
        assert "django_ledger.W004" not in [m.id for m in check_redis()]


def test_deploy_is_content_with_enough_replicas() -> None:
    with (
        RedisServer() as master,
        RedisServer(extra_args=["--replicaof", "127.0.0.1", str(master.port)]),
    ):
        deadline = time.monotonic() + 30
        with master.client() as client:
            while int(client.info("replication")["connected_slaves"]) < 1:
                assert time.monotonic() < deadline, "the replica never connected"
                time.sleep(0.02)
        with override_settings(LEDGER=config(master.url, REPLICAS=1)):
            assert "django_ledger.W004" not in [m.id for m in check_redis()]


class ClusterCacheClient(DefaultClient):
    """docs/cluster.md's django-redis client for a Redis Cluster: LOCATION is one node."""

    def connect(self, index: int = 0) -> Any:
        return RedisCluster.from_url(
            self._server[index], socket_connect_timeout=5, socket_timeout=10
        )


def test_a_django_redis_alias_can_hand_the_ledger_a_cluster_client(
    cluster: LocalCluster, namespace: str
) -> None:
    caches = {
        "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
        "ledger": {
            "BACKEND": "django_redis.cache.RedisCache",
            "LOCATION": f"redis://{cluster.startup_nodes[0]}",
            "OPTIONS": {"CLIENT_CLASS": f"{__name__}.ClusterCacheClient"},
        },
    }
    with override_settings(CACHES=caches, LEDGER={"CONNECTION": "ledger", "NAMESPACE": namespace}):
        ledger = get_ledger()
        assert isinstance(ledger.redis, RedisCluster)
        assert ledger.admit("a", "payload").status is AdmissionStatus.ADMITTED
        claim = ledger.claim("worker")
        assert claim is not None and ledger.settle(claim).status is SettlementStatus.SETTLED
        assert (
            ledger.runner.placement()[1]
            == f"127.0.0.1:{cluster.master_of(ledger.records_key).port}"
        )
        built = ledger.redis
    with cluster.client() as client:
        delete_namespace(client, namespace)
    built.close()
