"""Script calls, in a borrowed scope or outside any, keep redis-py's rules.

Each test is what a Django team relies on from redis-py, checked from the server's side
(``CLIENT LIST``, ``INFO commandstats``): a ``from_url`` client (ours, django-redis's)
loses no call when the server kills its connection; threads open no more connections
than redis-py alone would, in a scope or outside any (a web process's request threads),
and never more than a ``BlockingConnectionPool`` allows; ``disconnect()`` closes a
borrowed connection; nothing stays open once the scopes end, with no ``gc.collect()``
and with the garbage collector off, on RESP2 and RESP3; ``set_retry`` is obeyed; a
response callback sees every call; TLS, a unix socket, an ACL user and ``db`` keep
working.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from django_ledger import AdmissionStatus, Ledger, LedgerUnavailable
from django_ledger.core.lane import borrowed, current
from tests.support.redis_server import RedisServer

pytestmark = pytest.mark.standalone_only("each test starts a redis-server of its own")

THREADS = 64


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with RedisServer(unixsocket=True) as server:
        yield server


def named(server: RedisServer, name: str) -> list[dict[str, Any]]:
    with server.client() as admin:
        return [entry for entry in admin.client_list() if entry["name"] == name]


def fcall_calls(server: RedisServer) -> int:
    with server.client() as admin:
        return int(admin.info("commandstats").get("cmdstat_fcall", {}).get("calls", 0))


def kill_named(server: RedisServer, name: str) -> int:
    with server.client() as admin:
        return sum(admin.client_kill_filter(_id=entry["id"]) for entry in named(server, name))


def in_threads(count: int, work: Any) -> None:
    """Run ``work(n)`` on ``count`` threads started together; raise what any raised."""
    start = threading.Barrier(count)
    errors: list[BaseException] = []

    def body(n: int) -> None:
        try:
            start.wait(30)
            work(n)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors[:3]


# -- calls ------------------------------------------------------------------------------


def test_a_from_url_client_loses_no_call_when_the_server_kills_its_connection(
    own_redis: RedisServer,
) -> None:
    client = redis.Redis.from_url(own_redis.url, client_name="rules-kill")
    ledger = Ledger(client, "n", "kill")
    with borrowed(client):
        for round_ in range(3):
            for i in range(20):  # a busy thread: a worker's loop, a bulk loop
                assert ledger.admit(f"{round_}-{i}", "p").status is AdmissionStatus.ADMITTED
            assert kill_named(own_redis, "rules-kill") >= 1
            # The next call meets a connection the server closed: answered all the same.
            assert ledger.admit(f"after-{round_}", "p").status is AdmissionStatus.ADMITTED
    assert ledger.stats().pending == 63
    client.close()


def test_a_django_redis_client_loses_no_call_when_the_server_kills_its_connection(
    own_redis: RedisServer,
) -> None:
    from django_redis.pool import ConnectionFactory

    client = ConnectionFactory({}).connect(own_redis.url)
    client.client_setname("rules-dj")  # names the pool's one connection, checked out here
    ledger = Ledger(client, "n", "dj")
    with borrowed(client):
        for round_ in range(3):
            for i in range(20):
                assert ledger.admit(f"{round_}-{i}", "p").status is AdmissionStatus.ADMITTED
            with own_redis.client() as admin:
                admin.client_kill_filter(_type="normal", skipme=True)
            assert ledger.admit(f"after-{round_}", "p").status is AdmissionStatus.ADMITTED
    assert ledger.stats().pending == 63
    client.close()


# -- connections --------------------------------------------------------------------------


@pytest.mark.parametrize("scoped", [True, False], ids=["in-a-scope", "outside-any-scope"])
def test_threads_open_no_more_connections_than_redis_py_alone(
    own_redis: RedisServer, scoped: bool
) -> None:
    client = redis.Redis.from_url(own_redis.url, client_name="rules-64")
    ledger = Ledger(client, "n", "many")
    # Outside a scope (a web process's request threads, every caller but the worker),
    # 40 calls a thread: many calls in a row still take no connection of their own.
    calls = 20 if scoped else 40
    peak = 0

    def work(n: int) -> None:
        nonlocal peak
        with borrowed(client) if scoped else contextlib.nullcontext():
            assert (current(client) is not None) is scoped
            for i in range(calls):
                assert ledger.admit(f"{n}-{i}", "p").status is AdmissionStatus.ADMITTED
            peak = max(peak, len(named(own_redis, "rules-64")))

    in_threads(THREADS, work)
    # redis-py alone opens at most one connection per thread calling at once: so here.
    assert 1 <= peak <= THREADS
    assert 1 <= len(named(own_redis, "rules-64")) <= THREADS
    # Every connection is the pool's and idle: closing the idle ones closes them all.
    client.connection_pool.disconnect(inuse_connections=False)
    assert named(own_redis, "rules-64") == []
    assert ledger.stats().pending == THREADS * calls
    client.close()


def test_a_blocking_pool_s_limit_holds(own_redis: RedisServer) -> None:
    pool = redis.BlockingConnectionPool.from_url(
        own_redis.url, max_connections=4, timeout=30, client_name="rules-cap"
    )
    client = redis.Redis(connection_pool=pool)
    ledger = Ledger(client, "n", "cap")
    peak = 0

    def work(n: int) -> None:
        nonlocal peak
        with borrowed(client):
            for i in range(20):
                assert ledger.admit(f"{n}-{i}", "p").status is AdmissionStatus.ADMITTED
            peak = max(peak, len(named(own_redis, "rules-cap")))

    in_threads(THREADS, work)
    assert 1 <= peak <= 4
    assert len(named(own_redis, "rules-cap")) <= 4
    assert ledger.stats().pending == THREADS * 20
    client.close()


@pytest.mark.parametrize("collector", ["on", "off"])
@pytest.mark.parametrize("protocol", [2, 3])
def test_nothing_stays_open_once_the_scopes_end(
    own_redis: RedisServer, protocol: int, collector: str
) -> None:
    client = redis.Redis.from_url(own_redis.url, client_name="rules-end", protocol=protocol)
    ledger = Ledger(client, "n", "end")

    def work(n: int) -> None:
        with borrowed(client):
            assert current(client) is not None
            for i in range(20):
                ledger.admit(f"{n}-{i}", "p")
        assert current(client) is None

    was_enabled = gc.isenabled()
    if collector == "off":
        gc.disable()  # nothing may wait for a collection to be closed
    try:
        in_threads(THREADS, work)
        # the pool keeps its idle connections, as ever
        assert 1 <= len(named(own_redis, "rules-end")) <= THREADS
        # Every connection is back in the pool, idle: closing the idle ones closes them all.
        client.connection_pool.disconnect(inuse_connections=False)
        assert named(own_redis, "rules-end") == []  # no gc.collect() needed
    finally:
        if was_enabled:
            gc.enable()
    assert ledger.stats().pending == THREADS * 20
    client.close()


def test_disconnect_closes_a_borrowed_connection(own_redis: RedisServer) -> None:
    client = redis.Redis.from_url(own_redis.url, client_name="rules-disc")
    ledger = Ledger(client, "n", "disc")
    with borrowed(client):
        for i in range(20):
            ledger.admit(f"a-{i}", "p")
        assert len(named(own_redis, "rules-disc")) == 1  # the borrowed one: calls share it
        client.connection_pool.disconnect()
        assert named(own_redis, "rules-disc") == []
        assert ledger.admit("after", "p").status is AdmissionStatus.ADMITTED
        client.close()  # close() too
        assert named(own_redis, "rules-disc") == []
        assert ledger.admit("after-close", "p").status is AdmissionStatus.ADMITTED
    assert ledger.stats().pending == 22
    client.close()


# -- retries and hooks ----------------------------------------------------------------------


def test_set_retry_to_no_retries_gives_exactly_one_try(own_redis: RedisServer) -> None:
    client = redis.Redis.from_url(own_redis.url, socket_timeout=0.3, retry=Retry(NoBackoff(), 3))
    ledger = Ledger(client, "n", "once")
    with borrowed(client):
        for i in range(20):  # the connection is in hand before the retry policy changes
            ledger.admit(f"warm-{i}", "p")
        client.set_retry(Retry(NoBackoff(), 0))
        before = fcall_calls(own_redis)
        own_redis.pause()  # the call goes out and its reply never comes in time
        try:
            with pytest.raises(LedgerUnavailable):
                ledger.admit("slow", "p")
        finally:
            own_redis.resume()
    deadline = time.monotonic() + 10
    while fcall_calls(own_redis) == before and time.monotonic() < deadline:
        time.sleep(0.01)  # the server runs what it had received once it resumes
    time.sleep(0.2)  # a second copy, if one was sent, would be in by now
    assert fcall_calls(own_redis) - before == 1
    assert ledger.resolve("slow") is not None
    client.close()


def test_a_response_callback_sees_every_call(own_redis: RedisServer) -> None:
    client = redis.Redis.from_url(own_redis.url)
    seen: list[Any] = []

    def callback(response: Any, **options: Any) -> Any:
        seen.append(response)
        return response

    client.set_response_callback("FCALL", callback)
    ledger = Ledger(client, "n", "hooks")
    ledger.admit("warm", "p")  # loads the library: its first FCALL was refused
    seen.clear()
    with borrowed(client):
        for i in range(100):
            assert ledger.admit(f"id-{i}", "p").status is AdmissionStatus.ADMITTED
    assert len(seen) == 100
    client.close()


# -- where the connection goes ------------------------------------------------------------


def scoped_calls(client: redis.Redis, queue: str) -> Ledger:
    ledger = Ledger(client, "n", queue)
    with borrowed(client):
        for i in range(20):
            assert ledger.admit(f"id-{i}", "p").status is AdmissionStatus.ADMITTED
        assert ledger.admit("id-0", "p").status is AdmissionStatus.DUPLICATE
    return ledger


def test_tls_keeps_working() -> None:
    from tests.support.tls_server import tls_redis

    with tls_redis() as server:
        client = server.client(client_name="rules-tls")
        ledger = scoped_calls(client, "tls")
        assert ledger.stats().pending == 20
        assert len(named(server.server, "rules-tls")) == 1  # the pool's one, over TLS
        client.close()


def test_a_unix_socket_keeps_working(own_redis: RedisServer) -> None:
    client = redis.Redis.from_url(own_redis.unix_url, client_name="rules-unix")
    scoped_calls(client, "unix")
    (entry,) = named(own_redis, "rules-unix")
    assert entry["addr"].startswith("/") or entry.get("laddr", "").startswith("/")
    client.close()


def test_an_acl_user_and_a_db_keep_working(own_redis: RedisServer) -> None:
    with own_redis.client() as admin:
        admin.acl_setuser("ledger", enabled=True, passwords=["+secret"], keys=["*"])
        admin.execute_command("ACL", "SETUSER", "ledger", "+@all")
    url = f"redis://ledger:secret@127.0.0.1:{own_redis.port}/3"
    client = redis.Redis.from_url(url, client_name="rules-acl")
    scoped_calls(client, "acl")
    (entry,) = named(own_redis, "rules-acl")
    assert (entry["user"], str(entry["db"])) == ("ledger", "3")
    with redis.Redis(host="127.0.0.1", port=own_redis.port, db=3) as db3:
        assert db3.hlen("{n:acl}:records") == 20
    with own_redis.client() as db0:
        assert db0.exists("{n:acl}:records") == 0
    client.close()
