"""The short road of script calls (``core/lane.py``): a connection borrowed for a scope.

What a user checks: inside ``borrowed(client)`` a thread's script calls share one
connection of the pool; every call still answers as before when that connection is
killed, when the server restarts, when the ledger's functions are flushed, in a forked child
and from many threads; a script's own error is raised and leaves the connection usable;
outside a scope every call is redis-py's own; nested scopes share one connection. Each
test reads the server's own view (``CLIENT LIST``, ``INFO commandstats``).
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from django_ledger import AdmissionStatus, Ledger, LedgerUnavailable, State
from django_ledger.core.lane import borrowed, current
from tests.support.ledger_helpers import count_calls
from tests.support.redis_server import RedisServer


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def named_clients(server: RedisServer, name: str) -> list[dict[str, Any]]:
    with server.client() as client:
        return [entry for entry in client.client_list() if entry["name"] == name]


def client_on(server: RedisServer, name: str, **kwargs: Any) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=server.port, client_name=name, **kwargs)


def warmed(client: redis.Redis, queue: str) -> Ledger:
    """A ledger whose library is loaded (the first call's miss is behind it)."""
    ledger = Ledger(client, "n", queue)
    ledger.stats()
    ledger.admit("warm", "p")
    return ledger


def test_calls_in_a_scope_share_one_connection_of_the_pool(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-one")
    ledger = warmed(client, "one")
    with own_redis.client() as admin, count_calls(admin) as calls:
        with borrowed(client):
            assert current(client) is not None
            for i in range(20):
                assert ledger.admit(f"id-{i}", "p").status is AdmissionStatus.ADMITTED
        assert current(client) is None
    assert calls.by_command.get("fcall") == 20
    # The pool's one connection served them all: borrowed, then given back.
    assert len(named_clients(own_redis, "lane-one")) == 1
    client.connection_pool.disconnect(inuse_connections=False)
    assert named_clients(own_redis, "lane-one") == []
    client.close()


def test_outside_a_scope_every_call_is_redis_pys_own(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-outside")
    ledger = warmed(client, "outside")
    seen: list[Any] = []  # a response callback sees the calls of both roads

    def callback(response: Any, **options: Any) -> Any:
        seen.append(response)
        return response

    client.set_response_callback("FCALL", callback)
    for i in range(20):
        ledger.admit(f"out-{i}", "p")
    assert current(client) is None and len(seen) == 20
    assert len(named_clients(own_redis, "lane-outside")) == 1
    client.close()


def test_a_killed_connection_is_made_again_and_nothing_is_admitted_twice(
    own_redis: RedisServer,
) -> None:
    client = client_on(own_redis, "lane-kill")
    ledger = warmed(client, "kill")
    with borrowed(client):
        assert ledger.admit("first", "p").status is AdmissionStatus.ADMITTED
        with own_redis.client() as admin:
            killed = admin.client_kill_filter(_type="normal", skipme=True)
        assert killed >= 1
        # The next call meets a closed connection: it is answered all the same.
        assert ledger.admit("second", "p").status is AdmissionStatus.ADMITTED
        assert ledger.admit("second", "p").status is AdmissionStatus.DUPLICATE
    assert ledger.stats().pending == 3
    client.close()


def test_a_flushed_function_library_and_a_restart_are_answered(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-flush")
    ledger = warmed(client, "flush")
    with borrowed(client):
        assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
        client.function_flush()
        assert ledger.admit("b", "p").status is AdmissionStatus.ADMITTED
        own_redis.stop()
        with pytest.raises(LedgerUnavailable):
            ledger.admit("c", "p")
        own_redis.restart()  # the same port
        assert ledger.admit("c", "p").status is AdmissionStatus.ADMITTED
    client.close()


def test_a_script_error_is_raised_and_the_connection_keeps_working(
    own_redis: RedisServer,
) -> None:
    client = client_on(own_redis, "lane-error")
    ledger = warmed(client, "error")
    with borrowed(client):
        assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
        scope = current(client)
        assert scope is not None
        with pytest.raises(redis.ResponseError, match="boom"):
            scope.call("EVAL", (b"EVAL", "return redis.error_reply('boom')", 0))
        assert ledger.admit("b", "p").status is AdmissionStatus.ADMITTED
        assert len(named_clients(own_redis, "lane-error")) == 1  # no new connection
    client.close()


def test_a_forked_child_in_a_scope_makes_its_own_connection(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-fork")
    ledger = warmed(client, "fork")
    context = multiprocessing.get_context("fork")
    answers = context.Queue()

    def child() -> None:  # inherits the parent's open scope and ledger object
        answers.put(str(ledger.admit("child", "p").status))
        answers.put(str(ledger.admit("child", "p").status))

    with borrowed(client):
        assert ledger.admit("parent", "p").status is AdmissionStatus.ADMITTED
        process = context.Process(target=child)
        process.start()
        process.join(30)
        assert process.exitcode == 0
        assert [answers.get(timeout=5), answers.get(timeout=5)] == ["ADMITTED", "DUPLICATE"]
        # The parent's connection is untouched by the child's use and exit.
        assert ledger.admit("after", "p").status is AdmissionStatus.ADMITTED
    assert ledger.stats().pending == 4
    client.close()


def test_threads_each_in_a_scope_answer_every_admission_once(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-threads")
    ledger = warmed(client, "threads")
    answers: list[AdmissionStatus] = []
    lock = threading.Lock()

    def work() -> None:
        with borrowed(client):
            for i in range(50):
                # Every thread admits the same 50 ids: each is admitted once in all.
                status = ledger.admit(f"id-{i}", "p").status
                with lock:
                    answers.append(status)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers.count(AdmissionStatus.ADMITTED) == 50
    assert answers.count(AdmissionStatus.DUPLICATE) == 350
    assert len(named_clients(own_redis, "lane-threads")) <= 8
    claims = ledger.claim_many("w", 100)
    assert sorted(c.request_id for c in claims) == sorted(["warm", *(f"id-{i}" for i in range(50))])
    assert all(s.ok for s in ledger.settle_many([(c, State.COMPLETED) for c in claims]))
    client.close()


def test_nested_scopes_share_the_outer_connection(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-nested")
    ledger = warmed(client, "nested")
    with borrowed(client):
        outer = current(client)
        with borrowed(client, client):
            assert current(client) is outer
            ledger.admit("inner", "p")
        assert current(client) is outer  # the inner block did not give it back
        ledger.admit("outer", "p")
    assert current(client) is None
    assert len(named_clients(own_redis, "lane-nested")) == 1
    client.close()


def test_another_encoding_packs_as_redis_py_does(own_redis: RedisServer) -> None:
    latin = client_on(own_redis, "lane-latin", encoding="latin-1")
    ledger = warmed(latin, "latin")
    assert ledger.admit("é-out", "p").status is AdmissionStatus.ADMITTED  # redis-py's path
    with borrowed(latin):
        assert ledger.admit("é-in", "p").status is AdmissionStatus.ADMITTED
    fields = set(latin.hkeys("{n:latin}:records"))
    # Both roads wrote the id the same way, whichever bytes that is.
    out = next(field for field in fields if field.endswith(b"-out"))
    assert out.replace(b"-out", b"-in") in fields
    latin.close()


def test_text_beyond_ascii_travels_as_redis_pys_path_sends_it(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-text")
    ledger = warmed(client, "text")
    with borrowed(client):
        assert ledger.admit("é-id", "pâyload ✓").status is AdmissionStatus.ADMITTED
        claim = ledger.claim("w")
        assert claim is not None and claim.request_id == "warm"
        claim = ledger.claim("w")
        assert claim is not None and (claim.request_id, claim.payload) == ("é-id", "pâyload ✓")
        assert ledger.settle(claim, State.COMPLETED, result="ok ✓").ok
        assert ledger.results(["é-id"]) == ["ok ✓".encode()]
    # The same bytes as redis-py's own path writes: the id is the hash field, UTF-8.
    assert client.hexists("{n:text}:records", "é-id".encode())
    client.close()


def test_a_client_pinned_to_one_connection_keeps_it(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-pinned", single_connection_client=True)
    ledger = Ledger(client, "n", "pinned")
    with borrowed(client):
        assert current(client) is None  # no scope: its one connection is the client's
        assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
    assert len(named_clients(own_redis, "lane-pinned")) == 1
    client.close()


def test_a_non_redis_object_gets_no_scope() -> None:
    thing = object()
    with borrowed(thing):
        assert current(thing) is None


# -- on a cluster: each queue's calls on a borrowed connection to its own master ----------


def test_a_cluster_queue_calls_its_master_in_a_scope_and_survives_its_kill(
    cluster: Any, namespace: str
) -> None:
    from tests.support.redis_server import delete_namespace

    def refused(node: RedisServer) -> int:  # calls a node answered MOVED (or refused)
        with node.client() as admin:
            stats = admin.info("commandstats").get("cmdstat_fcall", {})
        return int(stats.get("rejected_calls", 0)) + int(stats.get("failed_calls", 0))

    client = cluster.client(client_name="lane-cluster")
    try:
        for master in cluster.masters():
            queue = cluster.queue_on(master, namespace)
            ledger = Ledger(client, namespace, queue)
            assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED  # loads the library
            with borrowed(client):
                before = {node.port: refused(node) for node in cluster.masters()}
                assert ledger.admit("b", "p").status is AdmissionStatus.ADMITTED
                # No master was asked for another's queue: the call went to the right one.
                assert {node.port: refused(node) for node in cluster.masters()} == before
                mine = named_clients(master, "lane-cluster")
                assert any(entry["cmd"] == "fcall" for entry in mine), mine
                with master.client() as admin:  # only ours: the cluster may serve other tests
                    for entry in mine:
                        admin.client_kill_filter(_id=entry["id"])
                assert named_clients(master, "lane-cluster") == []
                assert ledger.admit("c", "p").status is AdmissionStatus.ADMITTED
            claims = ledger.claim_many("w", 10)
            assert sorted(c.request_id for c in claims) == ["a", "b", "c"]
            assert all(s.ok for s in ledger.settle_many([(c, State.COMPLETED) for c in claims]))
    finally:
        client.close()
        with cluster.client() as cleaner:
            delete_namespace(cleaner, namespace)
