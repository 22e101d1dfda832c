"""The ``LEDGER`` setting: defaults, overrides, queues, and the connection it names."""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

import django_ledger
from django_ledger import AdmissionStatus, Ledger
from django_ledger.conf import (
    DEFAULTS,
    QueueSettings,
    connection,
    get_ledger,
    ledger_settings,
    reset_connections,
)
from django_ledger.connections import cluster_nodes
from tests.support.redis_server import RedisServer


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


def django_redis_cache(url: str) -> dict[str, Any]:
    return {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": url,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
    }


def test_defaults_when_the_setting_is_empty() -> None:
    with override_settings(LEDGER={}):
        assert ledger_settings.connection == "default"
        assert ledger_settings.namespace == "ledger"
        assert ledger_settings.queue_names == ["default"]
        assert ledger_settings.queue("default") == QueueSettings(
            name="default",
            max_payload_bytes=1_048_576,
            max_records=100_000,
            optimized=True,
            max_attempts=16,
            max_retained=100_000,
            retention=timedelta(days=7),
            lease=timedelta(seconds=30),
        )
        dispatch = ledger_settings.dispatch_settings
        assert dispatch.backend == "django_ledger.core.dispatch.RedisDispatchRegistry"
        assert (dispatch.connection, dispatch.namespace, dispatch.ttl) == (
            None,
            "kaal",
            7 * 24 * 3600,
        )


def test_no_setting_at_all_means_the_defaults() -> None:
    with override_settings():
        from django.conf import settings

        del settings.LEDGER
        assert ledger_settings.namespace == "ledger"
        assert ledger_settings.queue("default").max_attempts == DEFAULTS["MAX_ATTEMPTS"]


def test_the_setting_is_read_on_every_access() -> None:
    with override_settings(LEDGER={"NAMESPACE": "one"}):
        assert ledger_settings.namespace == "one"
        with override_settings(LEDGER={"NAMESPACE": "two"}):
            assert ledger_settings.namespace == "two"
        assert ledger_settings.namespace == "one"


def test_queue_overrides_go_over_defaults_over_built_in_defaults() -> None:
    config = {
        "DEFAULTS": {"MAX_ATTEMPTS": 5, "LEASE": 90},
        "QUEUES": {
            "default": {},
            "emails": {"MAX_ATTEMPTS": 3, "RETENTION": 3600, "GROUPS": ["mailers"]},
        },
    }
    with override_settings(LEDGER=config):
        default, emails = ledger_settings.queue("default"), ledger_settings.queue("emails")
    assert (default.max_attempts, default.lease, default.retention) == (
        5,
        timedelta(seconds=90),
        timedelta(days=7),
    )
    assert (emails.max_attempts, emails.lease, emails.retention) == (
        3,
        timedelta(seconds=90),
        timedelta(hours=1),
    )
    assert emails.groups == ("mailers",) and default.groups == ()


def test_an_unknown_queue_names_the_configured_ones() -> None:
    with (
        override_settings(LEDGER={"QUEUES": {"default": {}, "emails": {}}}),
        pytest.raises(
            ImproperlyConfigured, match=r"unknown ledger queue 'sms'.*'default', 'emails'"
        ),
    ):
        get_ledger("sms")


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ([], r"the LEDGER setting must be a dict"),
        ({"QUEUES": ["default"]}, r"LEDGER\['QUEUES'\] must be a dict"),
        ({"QUEUES": {"default": 3}}, r"LEDGER\['QUEUES'\]\['default'\] must be a dict"),
        (
            {"DEFAULTS": {"MAX_ATTEMPTS": 0}},
            r"LEDGER\['DEFAULTS'\]\['MAX_ATTEMPTS'\] must be at least 1",
        ),
        (
            {"QUEUES": {"default": {"LEASE": "30s"}}},
            r"LEDGER\['QUEUES'\]\['default'\]\['LEASE'\] must be a timedelta",
        ),
        ({"QUEUES": {"default": {"OPTIMIZED": 1}}}, r"must be True or False"),
        ({"QUEUES": {"default": {"GROUPS": "ops"}}}, r"GROUPS'\] must be a list of group names"),
        ({"NAMESPACE": "a b"}, r"LEDGER\['NAMESPACE'\] must be 1 to 100 characters"),
    ],
)
def test_bad_values_raise_naming_the_setting(config: Any, message: str) -> None:
    with override_settings(LEDGER=config), pytest.raises(ImproperlyConfigured, match=message):
        ledger_settings.queue("default")
        _ = ledger_settings.namespace


def test_get_ledger_through_a_url(redis_server: RedisServer, namespace: str) -> None:
    config = {
        "CONNECTION": redis_server.url,
        "NAMESPACE": namespace,
        "QUEUES": {"default": {}, "emails": {"MAX_ATTEMPTS": 3, "OPTIMIZED": False}},
    }
    with override_settings(LEDGER=config):
        ledger = django_ledger.get_ledger("emails")
        assert isinstance(ledger, Ledger)
        assert (ledger.namespace, ledger.queue, ledger.max_attempts, ledger.optimized) == (
            namespace,
            "emails",
            3,
            False,
        )
        assert ledger.admit("a", "payload").status is AdmissionStatus.ADMITTED
    # The record is in the suite's Redis, under the configured namespace.
    with redis_server.client() as client:
        assert client.hexists(f"{{{namespace}:emails}}:records", "a")


def test_get_ledger_through_a_django_redis_cache_alias(
    redis_server: RedisServer, namespace: str
) -> None:
    from django_redis import get_redis_connection

    caches = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    caches["ledger"] = django_redis_cache(redis_server.url)
    config = {"CONNECTION": "ledger", "NAMESPACE": namespace}
    with override_settings(CACHES=caches, LEDGER=config):
        ledger = get_ledger()
        assert ledger.redis.connection_pool is get_redis_connection("ledger").connection_pool
        assert ledger.admit("via-alias", "payload").status is AdmissionStatus.ADMITTED
        assert ledger.resolve("via-alias") is not None
    with redis_server.client() as client:
        assert client.hexists(f"{{{namespace}:default}}:records", "via-alias")


def test_a_cache_alias_must_exist_and_be_django_redis() -> None:
    caches = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    with (
        override_settings(CACHES=caches, LEDGER={"CONNECTION": "nope"}),
        pytest.raises(ImproperlyConfigured, match="'nope' is not a cache alias"),
    ):
        get_ledger()
    with (
        override_settings(CACHES=caches, LEDGER={"CONNECTION": "default"}),
        pytest.raises(ImproperlyConfigured, match="not django-redis"),
    ):
        get_ledger()


def test_bad_connections_are_refused() -> None:
    for spec, message in [
        ("http://127.0.0.1:6380", "scheme 'http' is not one of"),
        ("redis://127.0.0.1:port/0", "Port could not be cast|port"),
        (5, "must be a django-redis cache alias"),
        ({"CLUSTER": "127.0.0.1:7000"}, "CLUSTER must be a non-empty list"),
        ({"CLUSTER": ["127.0.0.1"]}, "is not 'host:port'"),
        ({"CLUSTER": ["127.0.0.1:\u00b2"]}, "is not 'host:port'"),
    ]:
        with pytest.raises(ImproperlyConfigured, match=message):
            connection(spec)


def test_cluster_startup_nodes_are_parsed() -> None:
    assert cluster_nodes({"CLUSTER": ["10.0.0.1:7000", "[::1]:7001"]}) == [
        ("10.0.0.1", 7000),
        ("::1", 7001),
    ]


def test_a_client_that_decodes_responses_is_refused(redis_server: RedisServer) -> None:
    with (
        override_settings(LEDGER={"CONNECTION": redis_server.url + "?decode_responses=True"}),
        pytest.raises(ImproperlyConfigured, match="decode_responses=False"),
    ):
        get_ledger()


def test_one_client_and_pool_per_process_reused(redis_server: RedisServer) -> None:
    with override_settings(LEDGER={"CONNECTION": redis_server.url}):
        first, second = get_ledger(), get_ledger()
        assert first.redis is second.redis
        assert first.redis is connection(redis_server.url)
        pool = first.redis.connection_pool
        first.redis.ping()
        second.redis.ping()
        assert len(pool._available_connections) + len(pool._in_use_connections) == 1
        reset_connections()
        assert get_ledger().redis is not first.redis


def _child_gets_its_own_client(url: str, parent_id: int, answer: Any) -> None:
    from django_ledger.conf import connection as child_connection

    client = child_connection(url)
    answer.put((id(client) != parent_id, client.ping()))


def test_a_forked_process_builds_its_own_client(redis_server: RedisServer) -> None:
    parent = connection(redis_server.url)
    context = multiprocessing.get_context("fork")
    answer = context.Queue()
    child = context.Process(
        target=_child_gets_its_own_client, args=(redis_server.url, id(parent), answer)
    )
    child.start()
    child.join(30)
    assert answer.get(timeout=5) == (True, True)
    assert connection(redis_server.url) is parent
