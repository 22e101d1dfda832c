"""``get_dispatch_registry`` and ``dispatch_node_id``: the registry the setting configures."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

import django_ledger
from django_ledger.conf import dispatch_node_id, get_dispatch_registry, reset_connections
from django_ledger.core.dispatch import MemoryDispatchRegistry, RedisDispatchRegistry
from tests.redis_server import RedisServer

FIRE = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
MEMORY = "django_ledger.dispatch.MemoryDispatchRegistry"


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
        ("django_ledger.dispatch.NoSuchRegistry", "does not import"),
        ("no_such_module.Registry", "does not import"),
        ("django_ledger.ledger.Ledger", "is not a DispatchRegistry subclass"),
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
