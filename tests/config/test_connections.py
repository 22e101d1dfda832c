"""Connection URLs: a unix socket, and the query arguments that go to redis-py.

Each test reads what the server itself saw (``CLIENT LIST``: how a client connected,
its name and database) and where the records landed, on a private redis-server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from django_ledger import AdmissionStatus, LedgerUnavailable, State
from django_ledger.conf import connection, get_dispatch_registry, get_ledger, reset_connections
from tests.support.redis_server import RedisServer

FIRE = 1_764_000_000


@pytest.fixture(autouse=True)
def _fresh_connections() -> Iterator[None]:
    reset_connections()
    yield
    reset_connections()


@pytest.fixture
def unix_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own that also listens on a unix socket."""
    with RedisServer(unixsocket=True) as server:
        yield server


def clients_named(server: RedisServer, name: str) -> list[dict[str, Any]]:
    """Return the server's view (``CLIENT LIST``) of the clients called ``name``."""
    with server.client() as client:
        return [entry for entry in client.client_list() if entry["name"] == name]


def records_in(server: RedisServer, db: int, namespace: str, queue: str = "default") -> set[bytes]:
    with redis.Redis(host="127.0.0.1", port=server.port, db=db) as client:
        return set(client.hkeys(f"{{{namespace}:{queue}}}:records"))


def test_a_unix_socket_url(unix_redis: RedisServer, namespace: str) -> None:
    url = f"{unix_redis.unix_url}?db=3&client_name=ledger-unix"
    with override_settings(LEDGER={"CONNECTION": url, "NAMESPACE": namespace}):
        ledger = get_ledger()
        assert ledger.admit("a", "payload").status is AdmissionStatus.ADMITTED
        claim = ledger.claim("worker")
        assert claim is not None and claim.request_id == "a"
        assert ledger.settle(claim, State.COMPLETED).ok
        record = ledger.resolve("a")
        assert record is not None and record.state is State.COMPLETED
        # The server saw the ledger come in through the socket, named, on database 3:
        # every connection it made (the pool's, and the thread's own of core/lane.py).
        seen_all = clients_named(unix_redis, "ledger-unix")
        assert 1 <= len(seen_all) <= 2, seen_all
        for seen in seen_all:
            assert "U" in seen["flags"], seen  # a unix socket client
            assert seen["addr"].startswith(str(unix_redis.socket_path)), seen
            assert seen["db"] == "3"
    assert records_in(unix_redis, 3, namespace) == {b"a"}
    assert records_in(unix_redis, 0, namespace) == set()


def test_a_unix_socket_url_gets_the_timeouts(unix_redis: RedisServer) -> None:
    with override_settings(
        LEDGER={"CONNECTION": unix_redis.unix_url, "TIMEOUTS": {"CONNECT": 2, "SOCKET": 3}}
    ):
        client = connection()
    options = client.connection_pool.connection_kwargs
    assert options["path"] == str(unix_redis.socket_path)
    assert (options["socket_connect_timeout"], options["socket_timeout"]) == (2, 3)
    assert client.ping()


def test_a_tcp_urls_query_arguments_reach_the_client(
    fresh_redis: RedisServer, namespace: str
) -> None:
    url = f"redis://127.0.0.1:{fresh_redis.port}/0?db=5&client_name=ledger-web"
    with override_settings(LEDGER={"CONNECTION": url, "NAMESPACE": namespace}):
        assert get_ledger().admit("a", "payload").status is AdmissionStatus.ADMITTED
        seen_all = clients_named(fresh_redis, "ledger-web")  # the pool's, and the lane's
        assert 1 <= len(seen_all) <= 2, seen_all
        for seen in seen_all:
            assert "U" not in seen["flags"] and seen["db"] == "5", seen
    assert records_in(fresh_redis, 5, namespace) == {b"a"}
    assert records_in(fresh_redis, 0, namespace) == set()


def test_the_dispatch_registry_url_takes_its_query_arguments(
    unix_redis: RedisServer, redis_server: RedisServer, namespace: str
) -> None:
    config = {
        "CONNECTION": redis_server.url,
        "DISPATCH": {
            "CONNECTION": f"{unix_redis.unix_url}?db=2&client_name=ledger-cron",
            "NAMESPACE": namespace,
        },
    }
    with override_settings(LEDGER=config):
        assert get_dispatch_registry().claim_dispatch("nightly", FIRE, "node-a")
        (seen,) = clients_named(unix_redis, "ledger-cron")
        assert "U" in seen["flags"] and seen["db"] == "2", seen
    with redis.Redis(host="127.0.0.1", port=unix_redis.port, db=2) as client:
        assert client.exists(f"{namespace}:cron_dispatch:nightly:{FIRE}")


def test_a_socket_path_where_no_redis_listens(tmp_path: Path) -> None:
    with (
        override_settings(LEDGER={"CONNECTION": f"unix://{tmp_path / 'none.sock'}"}),
        pytest.raises(LedgerUnavailable) as caught,
    ):
        get_ledger().stats()
    assert isinstance(caught.value.__cause__, redis.ConnectionError)


def test_an_unusable_query_argument_is_refused() -> None:
    with (
        override_settings(LEDGER={"CONNECTION": "unix:///run/redis.sock?db=two"}),
        pytest.raises(
            ImproperlyConfigured, match=r"ledger connection URL 'unix:///run/redis\.sock"
        ),
    ):
        get_ledger()


@pytest.mark.parametrize(
    "url",
    [
        "redis://127.0.0.1:6391/abc",
        "redis://127.0.0.1:6391/1/2",
        "redis://127.0.0.1:6391/-1",
        "rediss://127.0.0.1:6391/0x1",
    ],
)
def test_a_database_that_is_not_a_number_is_refused(url: str) -> None:
    # redis-py drops a path it cannot read as an int, and would quietly use database 0.
    with (
        override_settings(LEDGER={"CONNECTION": url}),
        pytest.raises(ImproperlyConfigured, match="database"),
    ):
        get_ledger()


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6391", "redis://127.0.0.1:6391/", "redis://h/15"]
)
def test_a_url_with_a_database_number_or_none_is_usable(url: str) -> None:
    from django_ledger.connections import url_problem

    assert url_problem(url) is None
