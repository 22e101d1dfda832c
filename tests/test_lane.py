"""The short road of script calls (``core/lane.py``): a thread's own connection per node.

What a user checks: every call still answers as before when the lane's connection is
killed, when the server restarts, when the script cache is flushed, in a forked child
and from many threads; a script's own error is raised and leaves the lane usable; and
clients the lane cannot serve (another encoding, client-side caching) keep redis-py's
path. Each test reads the server's own view (``CLIENT LIST``, ``INFO commandstats``).
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from django_ledger import AdmissionStatus, Ledger, LedgerUnavailable, State
from django_ledger.core import lane as lane_module
from django_ledger.core.lane import lane_for
from tests.ledger_helpers import count_calls
from tests.redis_server import RedisServer


@pytest.fixture(autouse=True)
def _lanes_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every thread gets its lane from its first call (the warm-up has its own test)."""
    monkeypatch.setattr(lane_module, "WARM_CALLS", 0)


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


def named_clients(server: RedisServer, name: str) -> list[dict[str, Any]]:
    with server.client() as client:
        return [entry for entry in client.client_list() if entry["name"] == name]


def client_on(server: RedisServer, name: str, **kwargs: Any) -> redis.Redis:
    return redis.Redis(host="127.0.0.1", port=server.port, client_name=name, **kwargs)


def test_calls_of_one_thread_share_one_connection_of_their_own(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-one")
    ledger = Ledger(client, "n", "q")
    with own_redis.client() as admin, count_calls(admin) as calls:
        for i in range(20):
            assert ledger.admit(f"id-{i}", "p").status is AdmissionStatus.ADMITTED
    assert calls.by_command.get("evalsha") == 20
    # The pool made no connection: every call went on the thread's own, the one named.
    assert client.connection_pool._created_connections == 0
    assert len(named_clients(own_redis, "lane-one")) == 1
    client.close()


def test_a_killed_lane_connection_is_made_again_and_nothing_is_admitted_twice(
    own_redis: RedisServer,
) -> None:
    client = client_on(own_redis, "lane-kill")
    ledger = Ledger(client, "n", "q")
    assert ledger.admit("first", "p").status is AdmissionStatus.ADMITTED
    with own_redis.client() as admin:
        killed = admin.client_kill_filter(_type="normal", skipme=True)
    assert killed >= 1
    # The next call meets a closed connection: it is answered all the same.
    assert ledger.admit("second", "p").status is AdmissionStatus.ADMITTED
    assert ledger.admit("second", "p").status is AdmissionStatus.DUPLICATE
    assert ledger.stats().pending == 2
    client.close()


def test_an_idle_connection_closed_by_the_server_is_replaced_before_use(
    own_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lane_module, "IDLE_POLL_S", 0.0)  # every call counts as idle
    client = client_on(own_redis, "lane-idle")
    ledger = Ledger(client, "n", "q")
    assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
    with own_redis.client() as admin:
        admin.client_kill_filter(_type="normal", skipme=True)
    client.ping()  # the pool's connection (it loaded the script) ends on a PING
    with own_redis.client() as admin, count_calls(admin) as calls:
        assert ledger.admit("b", "p").status is AdmissionStatus.ADMITTED
    # Polled, found closed, replaced: the script ran once, on a fresh lane connection;
    # the pool's connection was not needed for it.
    assert calls.by_command.get("evalsha") == 1
    last = sorted(entry["cmd"] for entry in named_clients(own_redis, "lane-idle"))
    assert last == ["evalsha", "ping"]
    client.close()


def test_a_flushed_script_cache_and_a_restart_are_answered(
    own_redis: RedisServer,
) -> None:
    client = client_on(own_redis, "lane-flush")
    ledger = Ledger(client, "n", "q")
    assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
    client.script_flush()
    assert ledger.admit("b", "p").status is AdmissionStatus.ADMITTED
    own_redis.stop()
    with pytest.raises(LedgerUnavailable):
        ledger.admit("c", "p")
    own_redis.restart()  # the same port
    assert ledger.admit("c", "p").status is AdmissionStatus.ADMITTED
    client.close()


def test_a_script_error_is_raised_and_the_lane_keeps_working(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-error")
    ledger = Ledger(client, "n", "q")
    assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
    lane = lane_for(client)
    assert lane is not None
    with pytest.raises(redis.ResponseError, match="boom"):
        lane.call((b"EVAL", "return redis.error_reply('boom')", 0))
    before = len(named_clients(own_redis, "lane-error"))
    assert ledger.admit("b", "p").status is AdmissionStatus.ADMITTED
    assert len(named_clients(own_redis, "lane-error")) == before  # no new connection
    client.close()


def test_a_forked_child_makes_its_own_connection(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-fork")
    ledger = Ledger(client, "n", "fork")
    assert ledger.admit("parent", "p").status is AdmissionStatus.ADMITTED
    context = multiprocessing.get_context("fork")
    answers = context.Queue()

    def child() -> None:  # uses the parent's ledger object, inherited by the fork
        answers.put(str(ledger.admit("child", "p").status))
        answers.put(str(ledger.admit("child", "p").status))

    process = context.Process(target=child)
    process.start()
    process.join(30)
    assert process.exitcode == 0
    assert [answers.get(timeout=5), answers.get(timeout=5)] == ["ADMITTED", "DUPLICATE"]
    # The parent's connection is untouched by the child's use and exit.
    assert ledger.admit("after", "p").status is AdmissionStatus.ADMITTED
    assert ledger.stats().pending == 3
    client.close()


def test_threads_each_get_a_lane_and_every_admission_is_answered_once(
    own_redis: RedisServer,
) -> None:
    client = client_on(own_redis, "lane-threads")
    ledger = Ledger(client, "n", "threads")
    answers: list[AdmissionStatus] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        for i in range(50):
            # Every thread admits the same 50 ids: each is admitted once in all.
            status = ledger.admit(f"id-{i}", "p").status
            with lock:
                answers.append(status)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers.count(AdmissionStatus.ADMITTED) == 50
    assert answers.count(AdmissionStatus.DUPLICATE) == 350
    claims = ledger.claim_many("w", 100)
    assert sorted(c.request_id for c in claims) == sorted(f"id-{i}" for i in range(50))
    assert all(s.ok for s in ledger.settle_many([(c, State.COMPLETED) for c in claims]))
    client.close()


def test_clients_the_lane_cannot_serve_keep_redis_pys_path(own_redis: RedisServer) -> None:
    latin = client_on(own_redis, "lane-latin", encoding="latin-1")
    assert lane_for(latin) is None
    ledger = Ledger(latin, "n", "latin")
    assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
    assert lane_for(object()) is None
    latin.close()


def test_text_beyond_ascii_travels_as_redis_pys_path_sends_it(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-text")
    ledger = Ledger(client, "n", "text")
    assert ledger.admit("é-id", "pâyload ✓").status is AdmissionStatus.ADMITTED
    claim = ledger.claim("w")
    assert claim is not None and (claim.request_id, claim.payload) == ("é-id", "pâyload ✓")
    assert ledger.settle(claim, State.COMPLETED, result="ok ✓").ok
    assert ledger.results(["é-id"]) == ["ok ✓".encode()]
    # The same bytes as redis-py's own path writes: the id is the hash field, UTF-8.
    assert client.hexists("{n:text}:records", "é-id".encode())
    client.close()


def test_a_call_that_may_have_run_is_not_sent_again_by_a_client_that_never_retries(
    own_redis: RedisServer,
) -> None:
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    client = client_on(own_redis, "lane-once", socket_timeout=0.2, retry=Retry(NoBackoff(), 0))
    ledger = Ledger(client, "n", "once")
    assert ledger.admit("warm", "p").status is AdmissionStatus.ADMITTED
    with own_redis.client() as admin:
        admin.config_resetstat()
    own_redis.pause()  # the call goes out and its reply never comes in time
    try:
        with pytest.raises(LedgerUnavailable):
            ledger.admit("slow", "p")
    finally:
        own_redis.resume()
    with own_redis.client() as admin:
        deadline = time.monotonic() + 10
        while not admin.hexists("{n:once}:records", "slow") and time.monotonic() < deadline:
            time.sleep(0.01)  # the server runs what it had received once it resumes
        # Resumed, the server ran the call it had received, and only that one: a client
        # that never retries does not get a second copy from the lane's hand-over.
        calls = admin.info("commandstats").get("cmdstat_evalsha", {}).get("calls", 0)
        assert calls == 1
    assert ledger.resolve("slow") is not None
    assert ledger.admit("after", "p").status is AdmissionStatus.ADMITTED
    client.close()


def test_a_lane_goes_with_its_client(own_redis: RedisServer) -> None:
    import gc
    import weakref

    client = client_on(own_redis, "lane-gone")
    Ledger(client, "n", "gone").admit("a", "p")
    lane = lane_for(client)
    assert lane is not None and lane_for(client) is lane  # one per pool
    gone = weakref.ref(lane)
    client.close()
    del client, lane
    gc.collect()
    assert gone() is None
    assert named_clients(own_redis, "lane-gone") == []  # its connection closed with it


def test_a_client_pinned_to_one_connection_keeps_it(own_redis: RedisServer) -> None:
    client = client_on(own_redis, "lane-pinned", single_connection_client=True)
    assert lane_for(client) is None
    ledger = Ledger(client, "n", "pinned")
    assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
    assert len(named_clients(own_redis, "lane-pinned")) == 1
    client.close()


# -- on a cluster: each queue's calls on a lane to its own master -------------------------


def test_a_cluster_queue_calls_its_master_on_a_lane_and_survives_its_kill(
    cluster: Any, namespace: str
) -> None:
    from tests.redis_server import delete_namespace

    def refused(node: RedisServer) -> int:  # calls a node answered MOVED (or refused)
        with node.client() as admin:
            stats = admin.info("commandstats").get("cmdstat_evalsha", {})
        return int(stats.get("rejected_calls", 0)) + int(stats.get("failed_calls", 0))

    client = cluster.client(client_name="lane-cluster")
    try:
        for master in cluster.masters():
            queue = cluster.queue_on(master, namespace)
            ledger = Ledger(client, namespace, queue)
            assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED  # loads the script
            before = {node.port: refused(node) for node in cluster.masters()}
            assert ledger.admit("b", "p").status is AdmissionStatus.ADMITTED
            # No master was asked for another's queue: the lane went to the right one.
            assert {node.port: refused(node) for node in cluster.masters()} == before
            # The queue's own master saw the call come in on a connection named as the
            # client, whose last command was the script call.
            mine = named_clients(master, "lane-cluster")
            assert any(entry["cmd"] == "evalsha" for entry in mine), mine
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


def test_a_thread_of_few_calls_keeps_to_the_pool_and_a_busy_one_gets_its_own(
    own_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lane_module, "WARM_CALLS", 16)
    client = client_on(own_redis, "lane-warm")
    ledger = Ledger(client, "n", "warm")

    seen: list[int] = []  # connections named so, as each thread ends its calls

    def admit(first: int, count: int) -> None:
        for i in range(first, first + count):
            assert ledger.admit(f"id-{i}", "p").status is AdmissionStatus.ADMITTED
        seen.append(len(named_clients(own_redis, "lane-warm")))

    # A thread per request, a few calls each (runserver's way): no connection of its own.
    for request in range(5):
        thread = threading.Thread(target=admit, args=(request * 3, 3))
        thread.start()
        thread.join()
    assert seen == [1] * 5  # the pool's one, shared
    # A thread that keeps calling gets its own after WARM_CALLS.
    thread = threading.Thread(target=admit, args=(100, 16 + 5))
    thread.start()
    thread.join()
    assert seen[-1] == 2
    assert client.connection_pool._created_connections == 1
    assert ledger.stats().pending == 15 + 21
    client.close()


def test_under_gevent_threads_keep_to_the_pool(
    own_redis: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys
    import types

    client = client_on(own_redis, "lane-green")
    assert lane_for(client) is not None
    patched = types.ModuleType("gevent.monkey")
    patched.is_module_patched = lambda name: name == "threading"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "gevent.monkey", patched)
    assert lane_for(client) is None  # greenlets by the thousand: no connection each
    ledger = Ledger(client, "n", "green")
    assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
    client.close()
