"""Issue 20, audited: what ``tests/core/test_lane_rules.py`` left open, from the server's side.

- Threads calling outside any scope (a web process's request threads, the path every
  caller but the worker takes) open no more connections than redis-py alone would: the
  old lane took over any thread after 16 calls and opened a second connection for it.
- A scope's connection is back in the pool when the scope ends with the garbage
  collector off (the old lane's RESP3 connections waited for a collection): on RESP2
  and RESP3.
- The worker's own scope (its main loop) gives its connection back when ``run`` returns,
  and a worker whose connections the server kills (a ``from_url`` client, which does not
  retry) loses no task and logs no failed call.
- Nothing in ``django_ledger`` but ``core/lane.py`` reaches into a redis-py object's
  private attributes (an AST walk; the private names it meets elsewhere are Django's or
  the project's own, listed).
"""

from __future__ import annotations

import ast
import gc
import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from django_ledger import AdmissionStatus, Ledger, State
from django_ledger.core.lane import borrowed, current
from django_ledger.core.worker import Job
from django_ledger.core.worker.handler import CallableHandler
from django_ledger.core.worker.runtime import Worker, WorkerConfig
from tests.core.test_lane_rules import in_threads, named
from tests.support.redis_server import RedisServer
from tests.support.worker_process import wait_until

THREADS = 64
PACKAGE = Path(__file__).resolve().parents[2] / "django_ledger"


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    with RedisServer() as server:
        yield server


# -- connections ----------------------------------------------------------------------


@pytest.mark.standalone_only("each test starts a redis-server of its own")
def test_threads_outside_a_scope_open_no_more_connections_than_redis_py(
    own_redis: RedisServer,
) -> None:
    client = redis.Redis.from_url(own_redis.url, client_name="audit-plain")
    ledger = Ledger(client, "n", "plain")
    peak = 0

    def work(n: int) -> None:
        nonlocal peak
        assert current(client) is None  # a request thread: no scope
        for i in range(40):  # past the old lane's warm-up of 16 calls
            assert ledger.admit(f"{n}-{i}", "p").status is AdmissionStatus.ADMITTED
        peak = max(peak, len(named(own_redis, "audit-plain")))

    in_threads(THREADS, work)
    assert 1 <= peak <= THREADS
    assert len(named(own_redis, "audit-plain")) <= THREADS
    # Every connection is the pool's and idle: closing the idle ones closes them all.
    client.connection_pool.disconnect(inuse_connections=False)
    assert named(own_redis, "audit-plain") == []
    assert ledger.stats().pending == THREADS * 40
    client.close()


@pytest.mark.standalone_only("each test starts a redis-server of its own")
@pytest.mark.parametrize("protocol", [2, 3])
def test_scopes_give_their_connections_back_with_the_collector_off(
    own_redis: RedisServer, protocol: int
) -> None:
    client = redis.Redis.from_url(own_redis.url, client_name="audit-gc", protocol=protocol)
    ledger = Ledger(client, "n", "gc")

    def work(n: int) -> None:
        with borrowed(client):
            assert current(client) is not None
            for i in range(20):
                ledger.admit(f"{n}-{i}", "p")
        assert current(client) is None

    was_enabled = gc.isenabled()
    gc.disable()  # nothing may wait for a collection to be closed
    try:
        in_threads(THREADS, work)
        assert 1 <= len(named(own_redis, "audit-gc")) <= THREADS
        client.connection_pool.disconnect(inuse_connections=False)
        assert named(own_redis, "audit-gc") == []
    finally:
        if was_enabled:
            gc.enable()
    assert ledger.stats().pending == THREADS * 20
    client.close()


# -- the worker's own scope --------------------------------------------------------------


def run_worker(worker: Worker) -> threading.Thread:
    runner = threading.Thread(target=worker.run, daemon=True)
    runner.start()
    return runner


def stop_worker(worker: Worker, runner: threading.Thread) -> None:
    worker.request_stop()
    runner.join(30)
    assert not runner.is_alive()


@pytest.mark.standalone_only("each test starts a redis-server of its own")
def test_the_worker_gives_its_loops_connection_back_when_it_returns(
    own_redis: RedisServer,
) -> None:
    client = redis.Redis.from_url(own_redis.url, client_name="audit-loop")
    ledger = Ledger(client, "n", "loop")
    for i in range(30):
        assert ledger.admit(f"id-{i}", "p").accepted
    worker = Worker(
        {"loop": ledger},
        {"loop": CallableHandler(lambda job: "done", max_attempts=5)},
        {"loop": 30.0},
        WorkerConfig(worker_id="w-loop", concurrency=1, burst=True),
    )
    assert worker.run() == 0
    assert ledger.stats().completed == 30
    # The loop's scope ended with run(): no connection is still checked out of the pool.
    client.connection_pool.disconnect(inuse_connections=False)
    assert named(own_redis, "audit-loop") == []
    client.close()


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.standalone_only("each test starts a redis-server of its own")
def test_a_worker_on_a_from_url_client_loses_nothing_when_the_server_kills_its_connections(
    own_redis: RedisServer,
) -> None:
    client = redis.Redis.from_url(own_redis.url, client_name="audit-killed")
    ledger = Ledger(client, "n", "killed")
    total = 120
    ledger.admit_many([(f"id-{i}", str(i)) for i in range(total)])
    kills: list[int] = []

    def handle(job: Job) -> str:
        # At concurrency 1 a job runs on the main loop's thread: each kill falls between
        # its script calls (a kill during a call fails on redis-py's path too, unretried).
        if int(job.claim.payload) % 10 == 9:
            with own_redis.client() as admin:
                kills.append(
                    sum(
                        admin.client_kill_filter(_id=e["id"])
                        for e in named(own_redis, "audit-killed")
                    )
                )
        return "done"

    captured = Captured()
    logger = logging.getLogger("django_ledger")
    logger.addHandler(captured)
    worker = Worker(
        {"killed": ledger},
        {"killed": CallableHandler(handle, max_attempts=5)},
        {"killed": 30.0},
        WorkerConfig(worker_id="w-killed", concurrency=1, repair=False),
    )
    runner = run_worker(worker)
    watcher = Ledger(own_redis.client(), "n", "killed")  # its own connection: never killed
    try:
        wait_until(lambda: watcher.stats().completed == total, timeout=60, what="every task")
    finally:
        stop_worker(worker, runner)
        logger.removeHandler(captured)
    assert sum(kills) >= 12  # the kills reached the worker's connections
    records = watcher.resolve_many([f"id-{i}" for i in range(total)])
    assert {(r.state, r.attempts) for r in records if r is not None} == {(State.COMPLETED, 1)}
    assert (worker.counts.processed, worker.counts.lost) == (total, 0)
    failed = [m for m in captured.messages if "unavailable" in m.lower() or "failed" in m]
    assert failed == [], failed[:3]
    watcher.redis.close()
    client.close()


# -- redis-py's private attributes ---------------------------------------------------------

#: Private names of Django's and the standard library's (a model's ``_meta``, a
#: manager, a named tuple's ``_asdict``, ``os._exit``, DRF's ``request._request``,
#: Django's ``OutputWrapper._out`` and ``Atomic._from_testcase``): reached anywhere.
NOT_REDIS_PY = {
    "_meta",
    "_default_manager",
    "_asdict",
    "_exit",
    "_request",
    "_out",
    "_from_testcase",
}
#: The project's own private names, reached on its own objects, where they are.
OWN = {
    ("admin/query.py", "_ledgers"),  # a LedgerQuery clone's
    ("admin/query.py", "_notes"),
    ("admin/query.py", "_total"),
    ("tasks/workflows.py", "_plan"),  # the project's LedgerBackend
    ("tasks/workflows.py", "_queue"),
    ("outbox/staging.py", "_ledger_outbox"),  # the project's mark on a DB connection
}


def private_reaches(source: str, where: str) -> set[tuple[str, str]]:
    """``obj._name`` and ``getattr(obj, "_name")`` in ``source``, ``self``/``cls`` aside."""
    tree = ast.parse(source, where)
    found: set[tuple[str, str]] = set()
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in {"self", "cls"}:
                continue
            if isinstance(owner, ast.Call) and getattr(owner.func, "id", "") == "super":
                continue
            name = node.attr
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "id", "") in {"getattr", "setattr", "hasattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            name = node.args[1].value
        if name and name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            found.add((where, name))
    return found


def test_nothing_but_the_lane_reaches_into_private_attributes() -> None:
    found: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where != "core/lane.py":
            found |= private_reaches(path.read_text(), where)
    assert {(where, name) for where, name in found if name not in NOT_REDIS_PY} - OWN == set()


def test_the_walk_sees_a_private_reach() -> None:
    # The shape the old core/transport.py had (``policy._retries``), and a getattr.
    planted = "def f(policy, c):\n    return policy._retries, getattr(c, '_sock'), self._own\n"
    assert private_reaches(planted, "planted.py") == {
        ("planted.py", "_retries"),
        ("planted.py", "_sock"),
    }


@pytest.mark.standalone_only("each test starts a redis-server of its own")
def test_a_worker_serves_within_the_smallest_blocking_pool_the_docs_name(
    own_redis: RedisServer,
) -> None:
    """docs/django.md: the loop holds one connection, an idle waker one: a pool of 2 serves."""
    pool = redis.BlockingConnectionPool.from_url(
        own_redis.url, max_connections=2, timeout=5, client_name="audit-two"
    )
    client = redis.Redis(connection_pool=pool)
    ledger = Ledger(client, "n", "two")
    captured = Captured()
    logger = logging.getLogger("django_ledger")
    logger.addHandler(captured)
    worker = Worker(
        {"two": ledger},
        {"two": CallableHandler(lambda job: "done", max_attempts=5)},
        {"two": 6.0},  # renewals beside the loop's connection and the waker's
        WorkerConfig(worker_id="w-two", concurrency=2, repair_interval=0.2),
    )
    runner = run_worker(worker)
    watcher = Ledger(own_redis.client(), "n", "two")
    try:
        for round_ in range(3):
            watcher.admit_many([(f"{round_}-{i}", "p") for i in range(20)])
            wait_until(lambda r=round_: watcher.stats().completed == 20 * (r + 1), timeout=30)
            peak = len(named(own_redis, "audit-two"))
            assert peak <= 2
            threading.Event().wait(3)  # idle: the waker blocks on the wake key meanwhile
    finally:
        stop_worker(worker, runner)
        logger.removeHandler(captured)
    # Nothing waited on the pool in vain. (A renewal answered LOST is a lease that lapsed
    # on a loaded machine, repair's business: not the pool's.)
    assert [m for m in captured.messages if "LOST" not in m] == []
    assert watcher.stats().completed == 60
    watcher.redis.close()
    client.close()
