"""The ledger's Lua as one Redis function library: named by its hash, loaded where it is
missing (as one transaction with the call that missed it), side by side with another
version's, read-only functions flagged ``no-writes``, errors named by file and line."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from django_ledger import AdmissionStatus, Ledger, SettlementStatus, State
from django_ledger.core.lane import borrowed, current
from django_ledger.core.library import READ_ONLY, library, located, script
from django_ledger.core.scripts import call, drop_old_libraries
from django_ledger.core.worker.libraries import PERIOD, OldLibraries
from tests.support.ledger_helpers import servers
from tests.support.library_versions import libraries, other_version
from tests.support.redis_server import RedisServer
from tests.support.replication import master_and_replica as replicated_pair


def flush_all(client: redis.Redis | RedisCluster) -> None:
    for server in servers(client):
        server.function_flush()


def test_a_fresh_server_loads_the_library_at_its_first_call(fresh_redis: RedisServer) -> None:
    with fresh_redis.client() as client:
        assert libraries(client) == []
        ledger = Ledger(client, "ns", "q")
        assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
        assert libraries(client) == [library().name]
        stats = client.info("commandstats")
        assert stats["cmdstat_function|load"]["calls"] == 1  # one load, with the call
        assert ledger.admit("b", "p").status is AdmissionStatus.ADMITTED
        assert client.info("commandstats")["cmdstat_function|load"]["calls"] == 1


def test_each_node_loads_at_its_own_first_call(
    redis_client: redis.Redis | RedisCluster, namespace: str
) -> None:
    flush_all(redis_client)
    ledgers = [Ledger(redis_client, namespace, f"q{i}") for i in range(6)]
    for ledger in ledgers:
        assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
    for ledger in ledgers:
        _, address = ledger.runner.placement()
        for server in servers(redis_client):
            kwargs = server.connection_pool.connection_kwargs
            if f"{kwargs.get('host')}:{kwargs.get('port')}" == address:
                assert libraries(server) == [library().name]


def test_a_borrowed_connection_finds_the_library_missing_and_the_call_loads_it(
    redis_client: redis.Redis | RedisCluster, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "scope")
    with borrowed(redis_client):
        assert current(redis_client) is not None
        assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
        flush_all(redis_client)
        assert ledger.admit("b", "p").status is AdmissionStatus.ADMITTED
        claims = ledger.claim_many("w", 5)
        flush_all(redis_client)
        settled = ledger.settle_many([(c, State.COMPLETED) for c in claims])
        assert [s.status for s in settled] == [SettlementStatus.SETTLED] * 2


def test_a_flush_storm_never_reaches_concurrent_callers(
    redis_client: redis.Redis | RedisCluster, namespace: str
) -> None:
    """Callers on four threads while another flushes every node's functions nonstop."""
    stop = threading.Event()
    flushes = [0]
    failures: list[str] = []
    admitted: list[str] = []
    settled: list[str] = []
    ledger = Ledger(redis_client, namespace, "storm")

    def flush() -> None:
        while not stop.is_set():
            flush_all(redis_client)
            flushes[0] += 1

    def work(me: int) -> None:
        try:
            for i in range(40):
                if ledger.admit(f"{me}-{i}", "p").status is AdmissionStatus.ADMITTED:
                    admitted.append(f"{me}-{i}")
                claim = ledger.claim(f"w{me}", lease=60)
                if claim is not None and ledger.settle(claim).status is SettlementStatus.SETTLED:
                    settled.append(claim.request_id)
        except Exception as error:
            failures.append(repr(error))

    flusher = threading.Thread(target=flush, daemon=True)
    flusher.start()
    workers = [threading.Thread(target=work, args=(me,)) for me in range(4)]
    for thread in workers:
        thread.start()
    for thread in workers:
        thread.join(120)
    stop.set()
    flusher.join(10)
    assert failures == []
    assert flushes[0] > 0
    assert sorted(admitted) == sorted(f"{me}-{i}" for me in range(4) for i in range(40))
    assert len(settled) == len(set(settled))  # each settled once
    stats = ledger.stats()
    assert stats.total == 160  # every admission counted once
    assert stats.completed == len(settled)
    assert stats.pending + stats.completed == 160


def test_read_only_functions_run_as_fcall_ro_and_writers_do_not(
    redis_client: redis.Redis | RedisCluster, namespace: str
) -> None:
    ledger = Ledger(redis_client, namespace, "ro")
    ledger.admit("a", "p")  # loads the library where the queue lives
    keys = list(ledger.runner.keys)
    now = redis_client.fcall_ro(script("now").function, len(keys), *keys, 0)
    assert int(now[0]) > 0
    with pytest.raises(redis.ResponseError, match="write flag"):
        redis_client.fcall_ro(script("admit").function, len(keys), *keys, 0)
    assert "stats" in READ_ONLY and "admit" not in READ_ONLY


def test_two_versions_answer_side_by_side(
    redis_client: redis.Redis | RedisCluster, namespace: str
) -> None:
    other, source = other_version()
    ledger = Ledger(redis_client, namespace, "versions")
    keys = list(ledger.runner.keys)
    try:
        for server in servers(redis_client):
            server.function_load(source, replace=True)
        assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED  # loads ours beside
        for server in servers(redis_client):
            if library().name in libraries(server):
                assert other in libraries(server)
        theirs = redis_client.fcall(f"{other}_now", len(keys), *keys, 0)
        assert int(theirs[1]) == 42
        ours = redis_client.fcall(script("now").function, len(keys), *keys, 0)
        assert len(ours) == 1
        claim = ledger.claim("w")
        assert claim is not None and ledger.settle(claim).ok
    finally:
        for server in servers(redis_client):
            if other in libraries(server):
                server.function_delete(other)


def test_an_error_names_the_lua_file_line_and_script() -> None:
    lua = library()
    at = next(p for p in lua.parts if p.path == "lib/claiming.lua").first + 13
    error = redis.ResponseError(
        f"user_function:{at}: boom script: {lua.name}_claim, on @user_function:{at}."
    )
    message = str(located(error))
    assert message == (
        "django_ledger/core/lua/lib/claiming.lua:14: boom script claim, "
        "on @django_ledger/core/lua/lib/claiming.lua:14."
    )
    # Another version's error (another hash) and an error with no line stay as they are.
    foreign = redis.ResponseError("user_function:3: boom script: ledger_0123456789ab_claim")
    assert located(foreign) is foreign
    plain = redis.ResponseError("mine")
    assert located(plain) is plain


def test_a_missing_function_under_a_pinned_client_uses_its_one_connection(
    fresh_redis: RedisServer,
) -> None:
    client = fresh_redis.client(single_connection_client=True)
    try:
        key = "{pinned}:clock"
        seconds, _ = call(client, script("server_time"), [key], [])
        assert int(seconds) > 0 and libraries(client) == [library().name]
    finally:
        client.close()


# -- with durability on: the load, the call and WAIT on one connection of the master ------


@pytest.fixture
def master_and_replica() -> Iterator[tuple[RedisServer, RedisServer]]:
    with replicated_pair() as pair:
        yield pair


@pytest.mark.parametrize("optimized", [True, False], ids=["optimized", "reference"])
def test_a_durable_write_loads_the_library_and_the_replica_has_both(
    master_and_replica: tuple[RedisServer, RedisServer], optimized: bool
) -> None:
    master, replica = master_and_replica
    client: Any = master.client()
    ledger = Ledger(
        client, "ns", "q", optimized=optimized, durability_replicas=1, durability_timeout_ms=5000
    )
    with replica.client() as on_replica:
        for round_ in range(3):
            client.function_flush()  # the replica's go too: FUNCTION FLUSH is replicated
            request_id = f"r{round_}"
            assert ledger.admit(request_id, "p").status is AdmissionStatus.ADMITTED
            # WAIT acknowledged the transaction: the record and the library are both there.
            assert on_replica.hget(ledger.records_key, request_id) is not None
            assert libraries(on_replica) == [library().name]
        # The replica runs the read-only functions itself (a failover would find them).
        keys = list(ledger.runner.keys)
        now = on_replica.fcall_ro(script("now").function, len(keys), *keys, 0, "r0")
        assert now[1] == client.hget(ledger.records_key, "r0")
        claim = ledger.claim("w")
        assert claim is not None
        client.function_flush()
        assert ledger.settle(claim, State.COMPLETED).status is SettlementStatus.SETTLED
    client.close()


def test_other_versions_are_dropped_and_ours_stays(
    redis_client: redis.Redis | RedisCluster, namespace: str
) -> None:
    other, source = other_version()
    for server in servers(redis_client):
        server.function_load(source, replace=True)
    ledger = Ledger(redis_client, namespace, "drops")
    assert ledger.admit("a", "p").status is AdmissionStatus.ADMITTED
    assert drop_old_libraries(redis_client) == [other]
    for server in servers(redis_client):
        assert other not in libraries(server)
    assert drop_old_libraries(redis_client) == []  # nothing left to drop
    claim = ledger.claim("w")  # ours still answers, or loads again where it never was
    assert claim is not None and ledger.settle(claim).ok


def test_the_worker_room_drops_them_and_leaves_them_to_a_user_who_may_not(
    fresh_redis: RedisServer,
) -> None:
    other, source = other_version()
    with fresh_redis.client() as admin:
        admin.function_load(source)
        admin.acl_setuser(
            "app",
            enabled=True,
            passwords=["+pw"],
            keys=["*"],
            commands=["+@all", "-function|delete"],
        )
        with redis.Redis(port=fresh_redis.port, username="app", password="pw") as app:
            room = OldLibraries([app, app])
            assert room.beat() == PERIOD  # refused: said once, left in place
            assert other in libraries(admin)
            assert room.beat() == PERIOD
        assert admin.info("commandstats").get("cmdstat_function|delete", {}).get("calls", 0) == 0
        room = OldLibraries([admin])
        assert room.beat() == PERIOD
        assert libraries(admin) == []
