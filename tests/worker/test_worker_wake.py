"""An idle worker blocks on Redis and wakes for an admission: no polling while nothing is due.

Each test runs ``manage.py ledger_worker`` processes (``--no-repair``: repair pages are
their own documented cadence) and counts the commands Redis served (``INFO
commandstats``) over an idle stretch: blocking calls, and no script call at all.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from django_ledger import Ledger, State
from django_ledger.core.sharded import ShardedLedger
from django_ledger.core.wake import block_for
from django_ledger.core.worker import CallableHandler, Job, Worker, WorkerConfig
from tests.support.redis_server import RedisServer
from tests.support.worker_process import ROOT, wait_until

SCRIPTS = ("fcall", "fcall_ro", "evalsha", "eval")


class Process:
    """One ``ledger_worker`` on the wake-up tests' settings."""

    def __init__(self, redis_url: str, namespace: str, args: list[str], log: Path) -> None:
        env = {
            **os.environ,
            "REDIS_URL": redis_url,
            "LEDGER_NAMESPACE": namespace,
            "DJANGO_SETTINGS_MODULE": "tests.support.wake_settings",
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",
        }
        self.log = log
        self._out = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "ledger_worker", "--no-repair", *args],
            cwd=ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def output(self) -> str:
        self._out.flush()
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        self._out.close()


@pytest.fixture
def start(
    redis_server: RedisServer, namespace: str, tmp_path: Path
) -> Iterator[Callable[..., Process]]:
    started: list[Process] = []

    def run(*args: str) -> Process:
        process = Process(
            redis_server.url, namespace, list(args), tmp_path / f"w{len(started)}.log"
        )
        started.append(process)
        return process

    yield run
    for process in started:
        process.stop()


def _primaries(client: Any) -> dict[str, Any]:
    if isinstance(client, redis.RedisCluster):
        return {"target_nodes": redis.RedisCluster.PRIMARIES}
    return {}


def reset(client: Any) -> float:
    client.config_resetstat(**_primaries(client))
    return time.monotonic()


def calls(client: Any) -> Counter[str]:
    """Commands served since the last reset, by name, summed over every master."""
    info = client.info("commandstats", **_primaries(client))
    nodes = info.values() if isinstance(client, redis.RedisCluster) else [info]
    counts: Counter[str] = Counter()
    for node in nodes:
        for name, stats in node.items():
            if name.startswith("cmdstat_"):
                counts[name.removeprefix("cmdstat_")] += int(stats["calls"])
    return counts


def scripts(counts: Counter[str]) -> int:
    return sum(counts[name] for name in SCRIPTS)


def runs(client: Any, namespace: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in client.hgetall(f"{namespace}:runs").items()}


def idle_stretch(client: Any, blocking_calls: int, blockers: int = 1) -> tuple[Counter[str], float]:
    """Reset the counts, wait for ``blocking_calls`` BZPOPMINs; the counts and seconds.

    First the rounds that settled the last tasks must be over. A blocking call sent
    while a task ran can time out while its worker's round is still under way (a loaded
    machine), but a blocking call is sent again only once the round is over: so wait for
    two blocking calls per thread that blocks (``blockers``: one per worker, one per
    shard), which each of them then has made.
    """
    reset(client)
    wait_until(lambda: calls(client)["bzpopmin"] >= 2 * blockers, 30, "the last rounds to end")
    began = reset(client)
    wait_until(lambda: calls(client)["bzpopmin"] >= blocking_calls, 20, "blocking calls")
    counts = calls(client)
    return counts, time.monotonic() - began


def up(client: Any, ledger: Any, namespace: str, request_id: str) -> None:
    """Admit one task and wait for it to be settled: the worker is up, and idle afterwards."""
    ledger.admit(request_id, "x")
    wait_until(lambda: completed(ledger, request_id), 60, f"{request_id} to complete")


def completed(ledger: Any, request_id: str) -> bool:
    record = ledger.resolve(request_id)
    return record is not None and record.state is State.COMPLETED


def test_an_idle_worker_blocks_and_an_admission_wakes_it(
    start: Callable[..., Process], redis_client: redis.Redis, namespace: str
) -> None:
    worker = start("raw")
    raw = Ledger(redis_client, namespace, "raw")
    up(redis_client, raw, namespace, "first")
    # Idle: blocking calls only, one per block time-out (1 s); not one claim.
    counts, seconds = idle_stretch(redis_client, 2)
    assert scripts(counts) == 0, counts
    assert counts["bzpopmin"] <= seconds / 1.0 + 2, (counts, seconds)
    # An admission now: the admit, the claim it woke and the settlement, no poll between.
    reset(redis_client)
    up(redis_client, raw, namespace, "second")
    assert scripts(calls(redis_client)) <= 4
    assert raw.resolve("second").state is State.COMPLETED  # type: ignore[union-attr]
    # A stop reaches the idle worker at once, whatever it blocks on.
    worker.process.send_signal(signal.SIGTERM)
    assert worker.process.wait(20) == 0, worker.output()


def test_a_delayed_task_wakes_the_worker_when_it_falls_due_not_before(
    start: Callable[..., Process], redis_client: redis.Redis, namespace: str
) -> None:
    start("raw")
    raw = Ledger(redis_client, namespace, "raw")
    up(redis_client, raw, namespace, "first")
    idle_stretch(redis_client, 1)
    reset(redis_client)
    admitted = raw.admit("later", "x", delay=1.5)
    wait_until(lambda: completed(raw, "later"), 30, "the delayed task")
    record = raw.resolve("later")
    assert record is not None and admitted.record is not None
    assert record.updated_at >= admitted.record.due_at
    # The admit, one claim on its wake-up (which learns the due time), one when it is due,
    # the settlement; a poll with back-off would have made several more.
    assert scripts(calls(redis_client)) <= 5, calls(redis_client)


def test_two_idle_workers_run_every_admission_and_neither_spins(
    start: Callable[..., Process], redis_client: redis.Redis, namespace: str
) -> None:
    start("raw")
    start("raw")
    raw = Ledger(redis_client, namespace, "raw")
    wait_until(lambda: redis_client.zcard(f"{namespace}:workers") == 2, 60, "two workers")
    idle_stretch(redis_client, 3, blockers=2)
    ids = [f"t{n}" for n in range(30)]
    for request_id in ids:
        raw.admit(request_id, "x")
    wait_until(lambda: raw.stats().completed == len(ids), 60, "every task")
    assert runs(redis_client, namespace) == dict.fromkeys(ids, 1)
    counts, seconds = idle_stretch(redis_client, 4, blockers=2)
    assert scripts(counts) == 0, counts
    assert counts["bzpopmin"] <= 2 * (seconds / 1.0 + 2), (counts, seconds)


@pytest.mark.parametrize("queue", ["sharded", "reference"])
def test_sharded_and_reference_queues_wake_too(
    start: Callable[..., Process], redis_client: redis.Redis, namespace: str, queue: str
) -> None:
    start(queue)
    ledger: Any = (
        ShardedLedger(redis_client, namespace, queue, 3)
        if queue == "sharded"
        else Ledger(redis_client, namespace, queue, optimized=False)
    )
    up(redis_client, ledger, namespace, "first")
    shards = 3 if queue == "sharded" else 1
    counts, seconds = idle_stretch(redis_client, 2, blockers=shards)
    assert scripts(counts) == 0, counts
    assert counts["zrangebyscore"] == 0, counts  # nor a reference claim's reads
    assert counts["bzpopmin"] <= shards * (seconds / 1.0 + 2), (counts, seconds)
    for n in range(6):  # on every shard
        up(redis_client, ledger, namespace, f"task-{n}")


def test_block_stays_within_the_clients_socket_timeout(redis_server: RedisServer) -> None:
    assert block_for(redis_server.client()) == 1.0
    assert block_for(redis_server.client(socket_timeout=0.3)) == pytest.approx(0.15)
    assert block_for(redis_server.client(socket_timeout=5)) == 1.0


def test_a_worker_whose_socket_timeout_is_shorter_than_the_block_waits_without_errors(
    redis_server: RedisServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = redis_server.client(decode_responses=False, socket_timeout=0.3)
    ledger = Ledger(client, namespace, "short")
    ran: list[str] = []

    def handle(job: Job) -> str:
        ran.append(job.claim.request_id)
        return "done"

    worker = Worker(
        {"short": ledger},
        {"short": CallableHandler(handle, max_attempts=1)},
        {"short": 30.0},
        WorkerConfig(repair=False, concurrency=1),
    )
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        ledger.admit("a", "x")
        wait_until(lambda: ran == ["a"], 30, "the first task")
        reset(client)
        wait_until(lambda: calls(client)["bzpopmin"] >= 3, 20, "blocking calls")
        ledger.admit("b", "x")
        wait_until(lambda: ran == ["a", "b"], 30, "the second task")
    finally:
        worker.request_stop()
        thread.join(30)
        client.close()
    assert not thread.is_alive()
    assert "unavailable" not in caplog.text.lower()
    assert "timeout" not in caplog.text.lower()


def blocked_clients(client: Any) -> list[dict[str, Any]]:
    """The server's clients blocked in a BZPOPMIN now (``CLIENT LIST``)."""
    listed = client.client_list()
    return [c for c in listed if c.get("cmd") == "bzpopmin" and "b" in c.get("flags", "")]


class Watched:
    """An in-process worker on one queue whose blocking calls name their thread."""

    def __init__(self, redis_server: RedisServer, namespace: str) -> None:
        self.client = redis_server.client(decode_responses=False)
        self.ledger = Ledger(self.client, namespace, "idle")
        self.ran: list[str] = []
        self.threads: list[str] = []
        #: When set up, each job waits for it (at most 30 s) before it returns.
        self.gate: threading.Event | None = None
        original = self.client.bzpopmin

        def bzpopmin(*args: Any, **kwargs: Any) -> Any:
            self.threads.append(threading.current_thread().name)
            return original(*args, **kwargs)

        self.client.bzpopmin = bzpopmin  # type: ignore[method-assign]
        self.worker = Worker(
            {"idle": self.ledger},
            {"idle": CallableHandler(self.handle, max_attempts=1)},
            {"idle": 30.0},
            WorkerConfig(repair=False, concurrency=4, wake_block=30.0),
        )
        self.thread = threading.Thread(target=self.worker.run)

    def handle(self, job: Job) -> str:
        if self.gate is not None:
            self.gate.wait(30)
        self.ran.append(job.claim.request_id)
        return "done"

    def __enter__(self) -> Watched:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.worker.request_stop()
        self.thread.join(40)
        self.client.close()


@pytest.mark.standalone_only("CLIENT LIST of one server")
def test_an_idle_workers_main_loop_blocks_itself_and_a_stop_ends_it_at_once(
    redis_server: RedisServer, namespace: str
) -> None:
    """With nothing in hand, the main loop blocks on the wake keys itself; a stop ends it.

    The block is 30 s here: a stop that waited for it would outlast the join below.
    """
    with Watched(redis_server, namespace) as watched:
        wait_until(lambda: len(blocked_clients(watched.client)) == 1, 20, "the idle block")
        assert watched.threads == ["ledger-main"]  # no waker thread between
        watched.worker.request_stop()
        watched.thread.join(10)
        assert not watched.thread.is_alive(), "the stop waited for the 30 s block"
    check = redis_server.client()
    assert not blocked_clients(check)
    stop_key = watched.worker._idle.waker.stop_key
    assert check.ttl(stop_key) != -1  # popped, or left to expire: never kept
    assert not check.exists(stop_key.partition(":stop:")[0])  # no other worker was woken


@pytest.mark.standalone_only("CLIENT LIST of one server")
def test_an_admission_ends_the_main_loops_own_block(
    redis_server: RedisServer, namespace: str
) -> None:
    with Watched(redis_server, namespace) as watched:
        wait_until(lambda: len(blocked_clients(watched.client)) == 1, 20, "the idle block")
        watched.ledger.admit("a", "x")
        wait_until(lambda: watched.ran == ["a"], 30, "the task")
        assert watched.threads[0] == "ledger-main"
        watched.ledger.admit("b", "x")  # whichever thread blocks now, it runs
        wait_until(lambda: watched.ran == ["a", "b"], 30, "the second task")
    assert not watched.thread.is_alive()


@pytest.mark.standalone_only("CLIENT LIST of one server")
def test_a_waker_call_left_from_a_run_hands_the_block_back_to_the_main_loop(
    redis_server: RedisServer, namespace: str
) -> None:
    """A waker thread's call sent while a job ran ends when the worker falls idle.

    Redis serves blocked clients in the order they blocked: left in flight (a 30 s block
    here), that call would take the next wake-up and hand it to the main loop, a thread
    switch later. The main loop pushes the worker's hand-back key instead, which ends the
    call, and blocks in its place.
    """
    release = threading.Event()
    with Watched(redis_server, namespace) as watched:
        watched.gate = release
        wait_until(lambda: len(blocked_clients(watched.client)) == 1, 20, "the idle block")
        watched.ledger.admit("a", "x")
        # While "a" runs, the waker thread blocks for admissions the free threads could take.
        wait_until(
            lambda: (
                watched.threads[-1] == "ledger-waker-0"
                and len(blocked_clients(watched.client)) == 1
            ),
            20,
            "the waker thread's block during the run",
        )
        release.set()
        wait_until(lambda: completed(watched.ledger, "a"), 30, "a to complete")
        # Idle again: the main loop's own call is the one blocked, the thread's ended.
        wait_until(
            lambda: (
                watched.threads[-1] == "ledger-main" and len(blocked_clients(watched.client)) == 1
            ),
            20,
            "the main loop's own block",
        )
        hand_key = watched.worker._idle.waker.hand_key
        assert not watched.client.exists(hand_key)  # popped by the thread's call
        watched.ledger.admit("b", "x")
        wait_until(lambda: completed(watched.ledger, "b"), 30, "b to complete")
    assert not watched.thread.is_alive()
