"""``get_dispatch_registry`` and ``dispatch_node_id``: the registry the setting configures."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

import django_ledger
from django_ledger.checks import check_settings
from django_ledger.conf import dispatch_node_id, get_dispatch_registry, reset_connections
from django_ledger.core.dispatch import (
    Dispatch,
    DispatchRegistry,
    MemoryDispatchRegistry,
    RedisDispatchRegistry,
)
from tests.support.redis_server import RedisServer

FIRE = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
MEMORY = "django_ledger.core.dispatch.MemoryDispatchRegistry"


@pytest.fixture(autouse=True)
def _fresh_registries() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


def test_redis_by_default_on_the_ledger_connection(
    redis_server: RedisServer, namespace: str
) -> None:
    config = {"CONNECTION": redis_server.url, "DISPATCH": {"NAMESPACE": namespace}}
    with override_settings(LEDGER=config):
        registry = get_dispatch_registry()
        assert isinstance(registry, RedisDispatchRegistry)
        assert registry.ttl == RedisDispatchRegistry.DEFAULT_TTL == 7 * 24 * 60 * 60
        registry.log_dispatch("nightly", FIRE, "node-a")
    with redis_server.client() as client:
        key = f"{namespace}:cron_dispatch:nightly:{int(FIRE.timestamp())}"
        assert client.exists(key)
        assert 0 < client.ttl(key) <= 7 * 24 * 60 * 60


def test_default_namespace_and_ttl_setting(redis_server: RedisServer) -> None:
    with override_settings(LEDGER={"CONNECTION": redis_server.url, "DISPATCH": {"TTL": 60}}):
        registry = django_ledger.get_dispatch_registry()
    assert isinstance(registry, RedisDispatchRegistry)
    assert (registry.namespace, registry.ttl) == ("kaal", 60)
    assert registry.build_redis_key("k", FIRE) == f"kaal:cron_dispatch:k:{int(FIRE.timestamp())}"


def test_a_connection_of_its_own(
    redis_server: RedisServer, fresh_redis: RedisServer, namespace: str
) -> None:
    config = {
        "CONNECTION": redis_server.url,
        "DISPATCH": {"CONNECTION": fresh_redis.url, "NAMESPACE": namespace},
    }
    with override_settings(LEDGER=config):
        registry = get_dispatch_registry()
        assert registry.claim_dispatch("nightly", FIRE, "node-a")
    with fresh_redis.client() as client:
        assert client.exists(f"{namespace}:cron_dispatch:nightly:{int(FIRE.timestamp())}")


def test_the_registry_follows_the_ledger_connection(
    redis_server: RedisServer, fresh_redis: RedisServer, namespace: str
) -> None:
    dispatch = {"NAMESPACE": namespace}
    with override_settings(LEDGER={"CONNECTION": redis_server.url, "DISPATCH": dispatch}):
        assert get_dispatch_registry().claim_dispatch("nightly", FIRE, "node-a")
    with override_settings(LEDGER={"CONNECTION": fresh_redis.url, "DISPATCH": dispatch}):
        assert get_dispatch_registry().claim_dispatch("nightly", FIRE, "node-b")
    with fresh_redis.client() as client:
        assert client.exists(f"{namespace}:cron_dispatch:nightly:{int(FIRE.timestamp())}")


def test_memory_by_dotted_path_keeps_its_state_per_process() -> None:
    with override_settings(LEDGER={"DISPATCH": {"BACKEND": MEMORY, "TTL": 120}}):
        registry = get_dispatch_registry()
        assert isinstance(registry, MemoryDispatchRegistry)
        assert registry.ttl == 120
        assert registry.claim_dispatch("nightly", FIRE, "node-a")
        again = get_dispatch_registry()
        assert again is registry
        assert not again.claim_dispatch("nightly", FIRE, "node-b")
        found = again.find_dispatch("nightly", FIRE)
        assert found is not None and found.node_id == "node-a"
        reset_connections()
        assert get_dispatch_registry().find_dispatch("nightly", FIRE) is None


def test_keyword_overrides() -> None:
    with override_settings(LEDGER={"DISPATCH": {"BACKEND": MEMORY}}):
        assert get_dispatch_registry(ttl=30).ttl == 30
        with pytest.raises(TypeError, match="unknown dispatch setting"):
            get_dispatch_registry(colour="red")


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        ("django_ledger.core.dispatch.NoSuchRegistry", "does not import"),
        ("no_such_module.Registry", "does not import"),
        ("django_ledger.core.Ledger", "is not a DispatchRegistry subclass"),
    ],
)
def test_a_bad_backend_names_the_setting(backend: str, message: str) -> None:
    with (
        override_settings(LEDGER={"DISPATCH": {"BACKEND": backend}}),
        pytest.raises(ImproperlyConfigured, match=rf"LEDGER\['DISPATCH'\]\['BACKEND'\].*{message}"),
    ):
        get_dispatch_registry()


def test_node_id_defaults_to_host_and_process() -> None:
    with override_settings(LEDGER={}):
        assert dispatch_node_id() == f"{socket.gethostname()}:{os.getpid()}"
    with override_settings(LEDGER={"DISPATCH": {"NODE_ID": "worker-7"}}):
        assert dispatch_node_id() == "worker-7"
    with (
        override_settings(LEDGER={"DISPATCH": {"NODE_ID": ""}}),
        pytest.raises(ImproperlyConfigured),
    ):
        dispatch_node_id()


class HashDispatchRegistry(DispatchRegistry):
    """A custom backend for the test below: every fire of a namespace in one Redis hash."""

    def __init__(
        self, redis: Any, namespace: str = "kaal", ttl: int = DispatchRegistry.DEFAULT_TTL
    ) -> None:
        super().__init__(ttl)
        self.redis = redis
        self.namespace = namespace

    @property
    def hash_key(self) -> str:
        return f"{self.namespace}:fires"

    def _field(self, key: str, fire_time: Any) -> str:
        return f"{key}:{int(fire_time.timestamp())}"

    def _record(self, key: str, fire_time: Any, node_id: str, status: str) -> Dispatch:
        return Dispatch(key, fire_time, datetime.now(UTC), node_id, status)

    def log_dispatch(
        self, key: str, fire_time: Any, node_id: str, status: str = "dispatched"
    ) -> Dispatch:
        record = self._record(key, fire_time, node_id, status)
        self.redis.hset(self.hash_key, self._field(key, fire_time), record.to_json())
        return record

    def find_dispatch(self, key: str, fire_time: Any) -> Dispatch | None:
        raw = self.redis.hget(self.hash_key, self._field(key, fire_time))
        return None if raw is None else Dispatch.from_json(raw)

    def claim_dispatch(self, key: str, fire_time: Any, node_id: str) -> bool:
        record = self._record(key, fire_time, node_id, "dispatched")
        return bool(self.redis.hsetnx(self.hash_key, self._field(key, fire_time), record.to_json()))

    def history(self, key: str, limit: int = 50) -> list[Dispatch]:
        records = [Dispatch.from_json(raw) for raw in self.redis.hvals(self.hash_key)]
        mine = sorted((r for r in records if r.key == key), key=lambda r: r.fire_time, reverse=True)
        return mine[:limit]


def test_a_custom_backend_is_built_from_the_settings(
    redis_server: RedisServer, fresh_redis: RedisServer, namespace: str
) -> None:
    backend = f"{__name__}.HashDispatchRegistry"
    config = {
        "CONNECTION": redis_server.url,
        "TIMEOUTS": {"CONNECT": 2, "SOCKET": 3},
        "DISPATCH": {
            "BACKEND": backend,
            "CONNECTION": fresh_redis.url,
            "NAMESPACE": namespace,
            "TTL": 120,
        },
    }
    with override_settings(LEDGER=config):
        assert check_settings() == []
        registry = get_dispatch_registry()
        assert type(registry) is HashDispatchRegistry
        # Called as Backend(client, namespace=..., ttl=...), the client its own connection's.
        assert (registry.namespace, registry.ttl) == (namespace, 120)
        options = registry.redis.connection_pool.connection_kwargs
        assert (options["port"], options["socket_connect_timeout"], options["socket_timeout"]) == (
            fresh_redis.port,
            2,
            3,
        )
        assert registry.claim_dispatch("nightly", FIRE, "node-a")
        # Built once per process and configuration: the same registry, the same answers.
        assert get_dispatch_registry() is registry
        assert not get_dispatch_registry().claim_dispatch("nightly", FIRE, "node-b")
        shorter = get_dispatch_registry(ttl=60)
        assert type(shorter) is HashDispatchRegistry and shorter is not registry
        assert shorter.ttl == 60
        assert [d.node_id for d in shorter.history("nightly")] == ["node-a"]
    # It wrote through the configured connection, in its own layout, and nowhere else.
    with fresh_redis.client() as client:
        stored = client.hget(f"{namespace}:fires", f"nightly:{int(FIRE.timestamp())}")
    assert stored is not None and Dispatch.from_json(stored).node_id == "node-a"
    with redis_server.client() as client:
        assert not client.exists(f"{namespace}:fires")
