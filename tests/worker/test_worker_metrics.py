"""Prometheus metrics of a real ``ledger_worker --metrics-port``, scraped over HTTP.

And the same command where ``prometheus_client`` cannot be imported: the worker runs
without metrics, and asking for them is a clear error naming the extra.
"""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families

from django_ledger import Ledger, State, operations
from tests.support.http_get import get
from tests.support.redis_server import RedisServer, free_port
from tests.support.worker_process import WorkerProcess, wait_until
from tests.support.worker_starts import starting
from tests.support.worker_variants import VariantWorker

Start = Callable[..., WorkerProcess]
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def start(redis_server: RedisServer, namespace: str, tmp_path: Path) -> Iterator[Start]:
    def make(args: list[str], log: Path, block: tuple[str, ...] = ()) -> WorkerProcess:
        if block:
            return VariantWorker(redis_server.url, namespace, args, log, block=block)
        return WorkerProcess(redis_server.url, namespace, args, log)

    yield from starting(tmp_path, make)


def scrape(port: int, host: str = "127.0.0.1") -> Samples:
    """Every sample of ``/metrics``, by name and labels; empty while nothing answers."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
            body = response.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return {}
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def tasks(samples: Samples, queue: str, task: str, outcome: str) -> float | None:
    """``ledger_tasks_total`` of one queue, task and outcome."""
    return value(samples, "ledger_tasks_total", queue=queue, task=task, outcome=outcome)


def started(client: redis.Redis, namespace: str) -> list[str]:
    return [line.decode().split()[0] for line in client.lrange(f"{namespace}:started", 0, -1)]


def test_counts_by_queue_task_and_outcome_and_the_run_time_histogram(
    start: Start, redis_client: redis.Redis, namespace: str
) -> None:
    raw = Ledger(redis_client, namespace, "raw")
    raw.admit_many([(f"job-{n}", "x") for n in range(20)])
    Ledger(redis_client, namespace, "failing").admit("bad", "x")
    port = free_port()
    worker = start("raw", "failing", "--concurrency", "4", "--metrics-port", str(port))

    def settled() -> Samples:
        samples = scrape(port)
        done = (
            tasks(samples, "raw", "record", "completed"),
            tasks(samples, "failing", "fail", "failed"),
        )
        return samples if done == (20, 1) else {}

    samples = wait_until(settled, what="20 completed and 1 failed on /metrics")
    assert raw.stats().completed == 20  # the counts match what ran
    assert tasks(samples, "failing", "fail", "retry") == 2
    outcomes = {
        dict(labels)["outcome"]
        for (name, labels) in samples
        if name == "ledger_tasks_total" and dict(labels)["queue"] == "raw"
    }
    assert outcomes == {"completed"}
    # One run time per attempt: 20 on raw, 3 on failing.
    for queue, task, count in (("raw", "record", 20), ("failing", "fail", 3)):
        assert value(samples, "ledger_task_seconds_count", queue=queue, task=task) == count
        inf = value(samples, "ledger_task_seconds_bucket", queue=queue, task=task, le="+Inf")
        assert inf == count
        total = value(samples, "ledger_task_seconds_sum", queue=queue, task=task)
        assert total is not None and total > 0
    assert value(samples, "ledger_lost_leases_total", queue="raw") is None  # nothing lost
    assert value(samples, "ledger_in_flight") is not None
    worker.signal(15)
    assert worker.wait() == 0, worker.output()


def test_in_flight_queue_depth_and_a_lost_lease(
    start: Start, redis_client: redis.Redis, namespace: str
) -> None:
    blocking = Ledger(redis_client, namespace, "blocking")
    blocking.admit_many([(request_id, "work") for request_id in ("a", "b", "c")])
    port = free_port()
    worker = start("blocking", "--concurrency", "1", "--prefetch", "0", "--metrics-port", str(port))
    (running,) = wait_until(lambda: started(redis_client, namespace), what="one task to start")
    samples = wait_until(
        lambda: (s := scrape(port)) and value(s, "ledger_queue_depth", queue="blocking") == 2 and s,
        what="the queue depth of the two that wait",
    )
    assert value(samples, "ledger_in_flight") == 1
    # The counters' flush samples the queue's depth: the gauge by state follows it.
    wait_until(
        lambda: (
            (s := scrape(port))
            and value(s, "ledger_queue_records", queue="blocking", state="claimed") == 1
            and value(s, "ledger_queue_records", queue="blocking", state="pending_due") == 2
        ),
        what="the records gauge of one claimed and two due",
    )
    # An operator ends the running task: its next renewal answers LOST.
    snap = operations.snapshot(blocking, running)
    assert snap is not None
    operations.mark_failed(blocking, running, snap.version)
    wait_until(lambda: "answered LOST" in worker.output(), what="the renewal to answer LOST")
    redis_client.set(f"{namespace}:release", 1)
    samples = wait_until(
        lambda: (
            (s := scrape(port))
            and value(s, "ledger_lost_leases_total", queue="blocking") == 1
            and tasks(s, "blocking", "wait_for_release", "completed") == 2
            and s
        ),
        what="one lost lease and two completed",
    )
    assert value(samples, "ledger_queue_depth", queue="blocking") is not None
    record = blocking.resolve(running)
    assert record is not None and record.state is State.FAILED  # the late outcome was not written
    worker.signal(15)
    assert worker.wait() == 0, worker.output()


def test_in_flight_falls_back_to_zero_when_the_work_is_done(
    start: Start, redis_client: redis.Redis, namespace: str
) -> None:
    Ledger(redis_client, namespace, "raw").admit("only", "x")
    port = free_port()
    worker = start("raw", "--metrics-port", str(port))
    wait_until(
        lambda: tasks(scrape(port), "raw", "record", "completed") == 1,
        what="the task to complete",
    )
    try:
        wait_until(
            lambda: value(scrape(port), "ledger_in_flight") == 0, timeout=5, what="in-flight 0"
        )
    finally:
        worker.signal(15)
        worker.wait()


def test_without_prometheus_client_the_worker_runs_and_its_port_serves_the_probes_only(
    start: Start, redis_client: redis.Redis, namespace: str
) -> None:
    raw = Ledger(redis_client, namespace, "raw")
    raw.admit_many([(f"job-{n}", "x") for n in range(5)])
    block = ("prometheus_client", "opentelemetry")
    plain = start("raw", "--burst", block=block)
    assert plain.wait() == 0, plain.output()
    assert raw.stats().completed == 5
    port = free_port()
    asked = start("raw", "--metrics-port", str(port), block=block)
    try:
        assert wait_until(lambda: get(port, "/healthz") == (200, "ok\n"), what="/healthz")
        # Ready once Redis has first answered ("starting" until then).
        assert wait_until(lambda: get(port, "/readyz") == (200, "ok\n"), what="/readyz")
        assert get(port, "/metrics")[0] == 404
    finally:
        asked.signal(15)
        assert asked.wait() == 0
    out = asked.output()
    assert "no /metrics on 127.0.0.1:" in out
    assert "pip install 'django-task-ledger[metrics]'" in out
    assert "Traceback" not in out


def answers(host: str, port: int) -> bool:
    """Whether anything accepts a connection on ``host:port``."""
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError:
        return False
    return True


def test_metrics_listen_on_the_loopback_address_unless_told_otherwise(
    start: Start, redis_client: redis.Redis, namespace: str
) -> None:
    Ledger(redis_client, namespace, "raw").admit("only", "x")
    port, other = free_port(), free_port()
    local = start("raw", "--metrics-port", str(port))
    chosen = start("raw", "--metrics-port", str(other), "--metrics-address", "127.0.0.2")
    wait_until(lambda: scrape(port) and scrape(other, "127.0.0.2"), what="both to serve metrics")

    # 127.0.0.2 reaches a socket bound to 0.0.0.0, not one bound to 127.0.0.1.
    assert not answers("127.0.0.2", port)
    assert not answers("127.0.0.1", other)
    for worker in (local, chosen):
        worker.signal(15)
        assert worker.wait() == 0, worker.output()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["--metrics-port", "0", "--metrics-address", "nowhere.invalid"],
            "cannot serve metrics on nowhere.invalid:0",
        ),
        (["--metrics-address", "0.0.0.0"], "--metrics-address needs --metrics-port"),
        (["--metrics-port", "70000"], "--metrics-port must be a port from 0 to 65535, got 70000"),
        (
            ["--metrics-port", "65535", "--processes", "2"],
            "--metrics-port 65535 with --processes 2 needs ports 65535 to 65536",
        ),
    ],
)
def test_a_metrics_address_that_cannot_serve_is_a_clear_error(
    start: Start, args: list[str], words: str
) -> None:
    worker = start("raw", "--burst", *args)
    assert worker.wait() != 0
    out = worker.output()
    assert words in out and "Traceback" not in out
