"""``LEDGER['TIMEOUTS']``: a Redis that stalls ends a call with LedgerUnavailable.

Every stall here is real: a listening socket that never answers, a listen backlog that
is full, a redis-server paused with SIGSTOP. Each call runs under a guard of minutes
(``GUARD``), far beyond what the time-outs under test need, so that a call a time-out
does not end fails the test instead of hanging the suite. No test measures how long a
call took.
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from types import FrameType
from typing import Any

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from django.test import Client, override_settings
from redis.cluster import RedisCluster

from django_ledger import AdmissionStatus, LedgerUnavailable
from django_ledger.conf import (
    TIMEOUT_DEFAULTS,
    Timeouts,
    connection,
    get_dispatch_registry,
    get_ledger,
    ledger_settings,
    reset_connections,
)
from django_ledger.core.dispatch import DispatchUnavailable
from tests.support.admin_fixtures import admin_user  # noqa: F401 - the fixture
from tests.support.cluster_server import redis_cluster
from tests.support.redis_server import RedisServer

#: How long a guarded call may take before the test fails: minutes, for a slow CI box.
GUARD = 120.0
#: The time-outs the stall tests set: short, so that redis-py's retries end soon.
SHORT = {"CONNECT": 0.2, "SOCKET": 0.2}
FIRE = 1_764_000_000


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


@contextmanager
def guard(seconds: float = GUARD) -> Iterator[None]:
    """Fail the test if the block still runs after ``seconds`` (SIGALRM, main thread)."""

    def expire(signum: int, frame: FrameType | None) -> None:
        pytest.fail(f"still waiting after {seconds:.0f} s: no time-out ended the call")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def silent_listener() -> Iterator[str]:
    """A port whose kernel completes every connection, and no one ever answers on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)  # room for every retry redis-py makes; nothing is accepted
        yield f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


@contextmanager
def full_backlog() -> Iterator[str]:
    """A port whose listen backlog is full: a new connection is never completed."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(0)
        port = sock.getsockname()[1]
        waiting: list[socket.socket] = []
        try:
            # Fill the backlog: once a connection no longer completes, it is full.
            while True:
                probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                probe.settimeout(0.2)
                waiting.append(probe)
                try:
                    probe.connect(("127.0.0.1", port))
                except TimeoutError:
                    break
                assert len(waiting) < 64, "the backlog never filled"
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            for probe in waiting:
                probe.close()


def unavailable_for(call: Any) -> LedgerUnavailable:
    """Run ``call`` under the guard; return the LedgerUnavailable a time-out made it raise."""
    with guard(), pytest.raises(LedgerUnavailable) as caught:
        call()
    assert isinstance(caught.value.__cause__, redis.TimeoutError), repr(caught.value.__cause__)
    return caught.value


# -- the setting --------------------------------------------------------------------------


def test_the_defaults_reach_a_url_client(redis_server: RedisServer) -> None:
    assert TIMEOUT_DEFAULTS == {"CONNECT": 5, "SOCKET": 10}
    with override_settings(LEDGER={"CONNECTION": redis_server.url}):
        assert ledger_settings.timeouts == Timeouts(connect=5.0, socket=10.0)
        options = connection().connection_pool.connection_kwargs
    assert (options["socket_connect_timeout"], options["socket_timeout"]) == (5.0, 10.0)


def test_a_timedelta_or_seconds_and_one_key_alone(redis_server: RedisServer) -> None:
    config = {"CONNECTION": redis_server.url, "TIMEOUTS": {"SOCKET": timedelta(seconds=2.5)}}
    with override_settings(LEDGER=config):
        assert ledger_settings.timeouts == Timeouts(connect=5.0, socket=2.5)
        options = connection().connection_pool.connection_kwargs
    assert (options["socket_connect_timeout"], options["socket_timeout"]) == (5.0, 2.5)


def test_changed_timeouts_get_a_client_of_their_own(redis_server: RedisServer) -> None:
    with override_settings(LEDGER={"CONNECTION": redis_server.url}):
        default = connection()
    with override_settings(LEDGER={"CONNECTION": redis_server.url, "TIMEOUTS": {"SOCKET": 1}}):
        short = connection()
        assert connection() is short
    assert short is not default
    assert short.connection_pool.connection_kwargs["socket_timeout"] == 1


@pytest.mark.parametrize(
    ("timeouts", "message"),
    [
        ({"CONNECT": 0}, r"LEDGER\['TIMEOUTS'\]\['CONNECT'\] must be more than 0"),
        ({"SOCKET": -1}, r"LEDGER\['TIMEOUTS'\]\['SOCKET'\] must be more than 0"),
        ({"SOCKET": 3601}, r"at most 3,600 seconds, got 3601"),
        ({"SOCKET": None}, r"must be a timedelta or a number of seconds, got None"),
        ({"CONNECT": "5s"}, r"must be a timedelta or a number of seconds, got '5s'"),
        ({"CONNECT": float("inf")}, r"must be finite"),
    ],
)
def test_a_bad_timeout_raises_naming_the_setting(
    redis_server: RedisServer, timeouts: dict[str, Any], message: str
) -> None:
    config = {"CONNECTION": redis_server.url, "TIMEOUTS": timeouts}
    with override_settings(LEDGER=config), pytest.raises(ImproperlyConfigured, match=message):
        get_ledger()


def test_timeouts_that_are_not_a_dict_are_refused() -> None:
    with (
        override_settings(LEDGER={"TIMEOUTS": 5}),
        pytest.raises(ImproperlyConfigured, match=r"LEDGER\['TIMEOUTS'\] must be a dict"),
    ):
        _ = ledger_settings.timeouts


# -- stalls ----------------------------------------------------------------------------------


def test_a_redis_that_never_answers_raises_unavailable() -> None:
    with silent_listener() as url, override_settings(LEDGER={"CONNECTION": url, "TIMEOUTS": SHORT}):
        error = unavailable_for(lambda: get_ledger().admit("a", "payload"))
    assert "Redis is unavailable" in str(error)


def test_a_connection_that_never_completes_raises_unavailable() -> None:
    with full_backlog() as url, override_settings(LEDGER={"CONNECTION": url, "TIMEOUTS": SHORT}):
        unavailable_for(lambda: get_ledger().stats())


def test_a_url_query_argument_wins_over_timeouts() -> None:
    # TIMEOUTS of an hour would hold the call past the guard: only the URL's ends it.
    hour = {"CONNECT": 3600, "SOCKET": 3600}
    with silent_listener() as url:
        config = {"CONNECTION": url + "?socket_timeout=0.2", "TIMEOUTS": hour}
        with override_settings(LEDGER=config):
            unavailable_for(lambda: get_ledger().claim("worker"))


def test_a_paused_server_raises_unavailable_then_serves_again(
    fresh_redis: RedisServer, namespace: str
) -> None:
    config = {"CONNECTION": fresh_redis.url, "NAMESPACE": namespace, "TIMEOUTS": SHORT}
    with override_settings(LEDGER=config):
        ledger = get_ledger()
        assert ledger.admit("before", "payload").status is AdmissionStatus.ADMITTED
        fresh_redis.pause()  # the pool's connection is open: a reply that never comes
        try:
            unavailable_for(lambda: ledger.admit("during", "payload"))
            unavailable_for(lambda: get_ledger().resolve("before"))
        finally:
            fresh_redis.resume()
        # The same client serves again once Redis does; what it acknowledged is there.
        record = ledger.resolve("before")
        assert record is not None and record.payload == "payload"
        assert ledger.admit("after", "payload").status is AdmissionStatus.ADMITTED


def test_the_dispatch_registrys_own_connection_has_the_timeouts(
    redis_server: RedisServer, namespace: str
) -> None:
    with silent_listener() as url:
        config = {
            "CONNECTION": redis_server.url,
            "TIMEOUTS": SHORT,
            "DISPATCH": {"CONNECTION": url, "NAMESPACE": namespace},
        }
        with override_settings(LEDGER=config):
            registry = get_dispatch_registry()
            with guard(), pytest.raises(DispatchUnavailable) as caught:
                registry.claim_dispatch("nightly", FIRE, "node-a")
    assert isinstance(caught.value, LedgerUnavailable)
    assert isinstance(caught.value.__cause__, redis.TimeoutError)


@pytest.mark.django_db
def test_an_admin_page_on_a_paused_server_answers_503(
    admin_client: Client, fresh_redis: RedisServer, namespace: str, settings: Any
) -> None:
    settings.LEDGER = {
        **settings.LEDGER,
        "CONNECTION": fresh_redis.url,
        "NAMESPACE": namespace,
        "TIMEOUTS": SHORT,
    }
    get_ledger().admit("a", "payload")
    fresh_redis.pause()
    try:
        with guard():
            response = admin_client.get("/admin/django_ledger/queue/default/change/")
    finally:
        fresh_redis.resume()
    assert response.status_code == 503
    text = response.content.decode()
    assert "could not read Redis" in text and "Redis is unavailable" in text


# -- a cluster -------------------------------------------------------------------------------


@pytest.fixture
def one_node_cluster() -> Iterator[RedisServer]:
    with redis_cluster(1) as nodes:
        yield nodes[0]


def cluster_config(node: RedisServer, namespace: str) -> dict[str, Any]:
    return {
        "CONNECTION": {"CLUSTER": [f"127.0.0.1:{node.port}"]},
        "NAMESPACE": namespace,
        "TIMEOUTS": SHORT,
    }


def test_every_cluster_node_gets_the_timeouts(
    one_node_cluster: RedisServer, namespace: str
) -> None:
    with override_settings(LEDGER=cluster_config(one_node_cluster, namespace)):
        ledger = get_ledger()
        assert ledger.admit("a", "payload").status is AdmissionStatus.ADMITTED
        client = ledger.redis
        assert isinstance(client, RedisCluster)
        nodes = client.get_nodes()
        assert nodes
        for node in nodes:
            options = node.redis_connection.connection_pool.connection_kwargs
            assert (options["socket_connect_timeout"], options["socket_timeout"]) == (0.2, 0.2)


def test_a_paused_cluster_cannot_be_connected_to(
    one_node_cluster: RedisServer, namespace: str
) -> None:
    # The cluster client reads the slots when it is built: a time-out ends that too.
    with override_settings(LEDGER=cluster_config(one_node_cluster, namespace)):
        one_node_cluster.pause()
        try:
            with guard(), pytest.raises(LedgerUnavailable, match=r"Redis Cluster at 127\.0\.0\.1"):
                get_ledger()
        finally:
            one_node_cluster.resume()
        assert get_ledger().admit("a", "payload").status is AdmissionStatus.ADMITTED


def test_a_cluster_that_stalls_under_a_built_client_raises_unavailable(
    one_node_cluster: RedisServer, namespace: str
) -> None:
    with override_settings(LEDGER=cluster_config(one_node_cluster, namespace)):
        ledger = get_ledger()
        assert ledger.admit("a", "payload").status is AdmissionStatus.ADMITTED
        one_node_cluster.pause()
        try:
            with guard(), pytest.raises(LedgerUnavailable):
                ledger.stats()
        finally:
            one_node_cluster.resume()
