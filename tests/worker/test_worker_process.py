"""``manage.py ledger_worker`` as real processes: drain, die, stop, retry, renew, time out.

Each test runs workers as subprocesses on the suite's redis-server, in its own
namespace, against the raw queues of ``tests.support.worker_settings``; what the handlers did is
read back from Redis (``tests.support.worker_handlers``).
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from django_ledger import Claim, Ledger, SettlementStatus, State
from tests.support.redis_server import RedisServer
from tests.support.worker_process import WorkerProcess, wait_until

Start = Callable[..., WorkerProcess]


@pytest.fixture
def start(redis_server: RedisServer, namespace: str, tmp_path: Path) -> Iterator[Start]:
    started: list[WorkerProcess] = []

    def run(*args: str) -> WorkerProcess:
        worker = WorkerProcess(
            redis_server.url, namespace, list(args), tmp_path / f"worker-{len(started)}.log"
        )
        started.append(worker)
        return worker

    yield run
    for worker in started:
        worker.stop()


@pytest.fixture
def queue(redis_client: redis.Redis, namespace: str) -> Callable[..., Ledger]:
    def build(name: str, **kw: object) -> Ledger:
        return Ledger(redis_client, namespace, name, **kw)  # type: ignore[arg-type]

    return build


def runs(client: redis.Redis, namespace: str) -> dict[str, int]:
    return {k.decode(): int(v) for k, v in client.hgetall(f"{namespace}:runs").items()}


def started(client: redis.Redis, namespace: str) -> list[list[str]]:
    return [line.decode().split() for line in client.lrange(f"{namespace}:started", 0, -1)]


def test_burst_drains_a_thousand_tasks_and_exits_zero(
    start: Start, queue: Callable[..., Ledger], redis_client: redis.Redis, namespace: str
) -> None:
    raw = queue("raw")
    ids = [f"job-{n:04d}" for n in range(1000)]
    raw.admit_many([(request_id, f"payload {request_id}") for request_id in ids])
    worker = start("raw", "--burst", "--concurrency", "8")
    assert worker.wait(120) == 0, worker.output()
    assert runs(redis_client, namespace) == dict.fromkeys(ids, 1)
    stats = raw.stats()
    assert (stats.completed, stats.pending, stats.claimed) == (1000, 0, 0)
    assert raw.results(["job-0042"]) == [b'{"echo": "payload job-0042"}']
    assert "outcome=completed queue=raw" in worker.output()


def test_sigkill_mid_task_runs_it_again_elsewhere_and_refuses_the_late_settlement(
    start: Start, queue: Callable[..., Ledger], redis_client: redis.Redis, namespace: str
) -> None:
    blocking = queue("blocking")
    blocking.admit("order-1042", "work")
    first = start("blocking", "--worker-id", "doomed", "--concurrency", "1", "--no-repair")
    wait_until(lambda: started(redis_client, namespace), what="the first attempt to start")
    first.process.kill()
    first.wait()
    (_, fence, attempt, owner) = started(redis_client, namespace)[0]
    assert (attempt, owner) == ("1", "doomed")
    redis_client.set(f"{namespace}:release", 1)  # the next attempt finishes at once
    second = start("blocking", "--worker-id", "survivor", "--concurrency", "1")
    wait_until(
        lambda: (r := blocking.resolve("order-1042")) is not None and r.state is State.COMPLETED,
        what="the task to complete on the second worker",
    )
    second.signal(signal.SIGTERM)
    assert second.wait() == 0, second.output()
    record = blocking.resolve("order-1042")
    assert record is not None and (record.attempts, record.owner) == (2, "survivor")
    assert runs(redis_client, namespace) == {"order-1042": 2}
    # The dead worker's late settlement of attempt 1 is refused by its fence.
    late = Claim("order-1042", "work", "doomed", 1, int(fence), 0)
    answer = blocking.settle(late, State.COMPLETED)
    assert answer.status is SettlementStatus.LOST
    assert blocking.stats().completed == 1


def test_sigterm_finishes_the_running_task_and_gives_back_the_prefetched(
    start: Start, queue: Callable[..., Ledger], redis_client: redis.Redis, namespace: str
) -> None:
    blocking = queue("blocking")
    ids = [f"t{n}" for n in range(6)]
    blocking.admit_many([(request_id, "work") for request_id in ids])
    worker = start("blocking", "--concurrency", "1", "--prefetch", "5", "--no-repair")
    wait_until(lambda: blocking.stats().claimed == 6, what="six claims in hand")
    wait_until(lambda: started(redis_client, namespace), what="one task to start")
    running = started(redis_client, namespace)[0][0]
    worker.signal(signal.SIGTERM)
    # The prefetched five go back at once, their attempt unspent, while one still runs.
    wait_until(lambda: blocking.stats().pending == 5, what="the prefetched claims back")
    assert worker.process.poll() is None, "it waits for the running task"
    redis_client.set(f"{namespace}:release", 1)
    assert worker.wait() == 0, worker.output()
    records = {r.request_id: r for r in blocking.resolve_many(ids) if r is not None}
    assert records[running].state is State.COMPLETED
    for request_id in set(ids) - {running}:
        assert (records[request_id].state, records[request_id].attempts) == (State.PENDING, 0)
    assert runs(redis_client, namespace) == {running: 1}
    assert "gave back 5 claim(s)" in worker.output()


def test_a_second_signal_stops_at_once_and_the_lease_brings_the_task_back(
    start: Start, queue: Callable[..., Ledger], redis_client: redis.Redis, namespace: str
) -> None:
    blocking = queue("blocking")
    blocking.admit("stuck", "work")
    worker = start("blocking", "--concurrency", "1", "--no-repair")
    wait_until(lambda: started(redis_client, namespace), what="the task to start")
    worker.signal(signal.SIGINT)
    wait_until(lambda: "stopping:" in worker.output(), what="the graceful stop to begin")
    worker.signal(signal.SIGINT)
    assert worker.wait(20) == 1
    record = blocking.resolve("stuck")
    assert record is not None and record.state is State.CLAIMED  # its lease will run out


@pytest.mark.parametrize("concurrency", ["1", "2"])
def test_a_stop_leaves_a_task_running_past_the_shutdown_timeout_to_its_lease(
    start: Start,
    queue: Callable[..., Ledger],
    redis_client: redis.Redis,
    namespace: str,
    concurrency: str,
) -> None:
    # With concurrency 1 the main loop runs the task itself: the stop's promise still holds.
    blocking = queue("blocking")
    blocking.admit("stuck", "work")
    args = ["blocking", "--concurrency", concurrency, "--shutdown-timeout", "1", "--no-repair"]
    worker = start(*args)
    wait_until(lambda: started(redis_client, namespace), what="the task to start")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0, worker.output()
    assert "still running after 1.0 s: leaving them to their leases" in worker.output()
    record = blocking.resolve("stuck")
    assert record is not None and record.state is State.CLAIMED  # its lease will run out


def test_a_raising_task_is_retried_then_fails(
    start: Start, queue: Callable[..., Ledger], redis_client: redis.Redis, namespace: str
) -> None:
    failing = queue("failing")
    failing.admit("bad", "work")
    worker = start("failing", "--max-tasks", "3", "--concurrency", "1")
    assert worker.wait(60) == 0, worker.output()
    record = failing.resolve("bad")
    assert record is not None and (record.state, record.attempts) == (State.FAILED, 3)
    assert [line[2] for line in started(redis_client, namespace)] == ["1", "2", "3"]
    out = worker.output()
    assert out.count("outcome=retry queue=failing") == 2
    assert "outcome=failed queue=failing" in out and "reason=builtins.RuntimeError" in out


def test_a_task_outliving_its_lease_keeps_it_and_completes_once(
    start: Start, queue: Callable[..., Ledger], redis_client: redis.Redis, namespace: str
) -> None:
    slow = queue("slow")
    slow.admit("long", "work")
    worker = start("slow", "--burst", "--concurrency", "2")
    assert worker.wait(60) == 0, worker.output()
    record = slow.resolve("long")
    assert record is not None and (record.state, record.attempts) == (State.COMPLETED, 1)
    assert runs(redis_client, namespace) == {"long": 1}
    assert "outcome=lost" not in worker.output()


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_a_hung_task_past_its_timeout_is_ended_and_retried(
    start: Start,
    queue: Callable[..., Ledger],
    redis_client: redis.Redis,
    namespace: str,
    mode: str,
) -> None:
    # Threads stop a task at its next Python step; a process stops even a C call (kill).
    name = "hanging" if mode == "threads" else "hanging_c"
    hanging = queue(name)
    hanging.admit("hang", "work")
    args = [name, "--concurrency", "1"]
    if mode == "processes":
        args += ["--processes", "1"]
    worker = start(*args)
    wait_until(
        lambda: (r := hanging.resolve("hang")) is not None and r.state is State.COMPLETED,
        timeout=45,
        what="the retried attempt to complete",
    )
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    record = hanging.resolve("hang")
    assert record is not None and record.attempts == 2
    assert "ran past its time-out of 1" in worker.output()


@pytest.mark.parametrize("concurrency", ["1", "8"])
def test_coroutine_handlers_run_on_the_event_loop(
    start: Start,
    queue: Callable[..., Ledger],
    redis_client: redis.Redis,
    namespace: str,
    concurrency: str,
) -> None:
    coro = queue("async")
    coro.admit_many([(f"a{n}", "x") for n in range(20)])
    worker = start("async", "--burst", "--concurrency", concurrency)
    assert worker.wait(60) == 0, worker.output()
    assert coro.stats().completed == 20
    assert coro.results(["a7"]) == [b"async done"]


def test_an_unknown_queue_is_a_clear_error(start: Start) -> None:
    worker = start("nope", "--burst")
    assert worker.wait(30) != 0
    assert "unknown queue(s) 'nope'" in worker.output()


def test_processes_drain_together_and_each_task_runs_once(
    start: Start, queue: Callable[..., Ledger], redis_client: redis.Redis, namespace: str
) -> None:
    raw = queue("raw")
    ids = [f"p{n:03d}" for n in range(300)]
    raw.admit_many([(request_id, "x") for request_id in ids])
    worker = start("raw", "--processes", "2", "--concurrency", "2", "--burst")
    assert worker.wait(90) == 0, worker.output()
    assert runs(redis_client, namespace) == dict.fromkeys(ids, 1)


def test_sigterm_stops_every_process_cleanly(
    start: Start, queue: Callable[..., Ledger], redis_client: redis.Redis, namespace: str
) -> None:
    blocking = queue("blocking")
    blocking.admit_many([("one", "w"), ("two", "w")])
    worker = start("blocking", "--processes", "2", "--prefetch", "0", "--no-repair")
    wait_until(lambda: len(started(redis_client, namespace)) == 2, what="both tasks running")
    # Two processes at once, each running one: two worker ids.
    assert len({line[3] for line in started(redis_client, namespace)}) == 2
    worker.signal(signal.SIGTERM)
    redis_client.set(f"{namespace}:release", 1)
    assert worker.wait(60) == 0, worker.output()
    assert blocking.stats().completed == 2
