"""No-op tasks drained by ``ledger_worker`` beside huey, dramatiq, RQ and Celery.

Run from the repository root, in the benchmark's scratch virtualenv (the peers are not
dependencies of the project; ``--setup`` makes ``.venv-bench`` with them and the
project, editable, in it):

    python3 -m benchmarks.worker_bench --setup            # once: makes .venv-bench
    .venv-bench/bin/python -m benchmarks.worker_bench     # 5 rounds of 5,000 tasks

It starts its own redis-server on a free port (never 6379), pins it to CPU 0 and itself
to CPU 1 (``sched_setaffinity``, what ``taskset`` does; every worker process it starts
inherits CPU 1), and runs rounds. A round runs every system once, in an order that turns
by one each round; for each: ``FLUSHALL``, admit the tasks (not timed), ``CONFIG
RESETSTAT``, start the worker process, poll the system's own count of what is left every
2 ms until nothing is, stop the worker. Systems (``--only`` picks some):

* ``ledger``: ``manage.py ledger_worker bench`` with its defaults (concurrency 8,
  prefetch 8, repair and heartbeats on, one log line per task), a raw ``HANDLER`` queue
  whose handler returns at once (``tests.support.bench_handlers.noop``);
* ``ledger-nocount``: the same with ``--no-counters`` (no counters for the admin's
  charts): set against ``ledger`` in the same rounds, it gives the counters' cost;
* ``ledger-quiet``: the same with ``-v 0`` (no log line per task);
* ``ledger-task``: the same on a Django task (``tests.support.quiet_tasks.tasks.noop``, an app
  with no signal receivers of its own) admitted with ``django_ledger.tasks.enqueue_many``;
* ``ledger-task-c1``: that at ``--concurrency 1 --prefetch 0``;
* ``ledger-c1``: ``ledger_worker bench --concurrency 1 --prefetch 0``;
* ``huey``: ``huey_consumer -w 1 -k thread`` (one thread);
* ``dramatiq``: ``dramatiq --processes 1 --threads 8``;
* ``rq``: ``rq worker --burst`` (its default worker: a forked work horse per job);
* ``rq-simple``: ``rq worker --burst --worker-class rq.worker.SimpleWorker`` (no fork);
  both RQ runs drain ``--rq-tasks`` (500) rather than ``--tasks``, to keep rounds short;
* ``celery``: ``celery worker --pool threads --concurrency 8`` (one process).

Two figures per run: the **drain rate**, tasks done between the first one seen done and
the last, over that time (the worker's start-up is not in it), and the **wall** time
from starting the process until drained (start-up in it). Each rate is printed with the
Redis commands per task from ``INFO commandstats`` over the same window, less the
bench's own polls (commands run inside Lua scripts count too, as commandstats counts
them; ``scripts/task`` counts ``FCALL``, ``EVALSHA`` and ``EVAL`` alone). After the rounds, one
more untimed run per system under ``MONITOR`` counts the requests the worker sent
(``sent/task``: commands from clients only, not those scripts ran; a pipeline's commands
count one each), with the most frequent.

``--profile`` instead drains tasks through an in-process ``Worker`` (the runtime, no
subprocess) under cProfile (every thread of it), with a ``perf_counter`` account of the
time spent waiting on Redis, and prints where the rest goes: the raw ``HANDLER`` path
(``runtime``) and Django tasks (``task``: ``tests.support.quiet_tasks``'s no-op through the
``TaskHandler`` ``ledger_worker`` builds), each with the defaults and at concurrency 1.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

if TYPE_CHECKING:
    from tests.support.redis_server import RedisServer

VENV = ROOT / ".venv-bench"
PEERS = ["huey", "dramatiq[redis]", "rq", "celery[redis]"]
NAMESPACE = "bench"
POLL = 0.002
SYSTEMS = [
    "ledger",
    "ledger-nocount",
    "ledger-quiet",
    "ledger-task",
    "ledger-c1",
    "ledger-task-c1",
    "huey",
    "dramatiq",
    "rq",
    "rq-simple",
    "celery",
]
SCRIPT_COMMANDS = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_evalsha_ro", "cmdstat_fcall")


def venv_bin(name: str) -> str:
    here = Path(sys.executable).parent / name
    return str(here if here.exists() else VENV / "bin" / name)


# -- the systems --------------------------------------------------------------------------


@dataclass
class System:
    """How to admit, start and watch one system."""

    name: str
    admit: Callable[[Any, int], None]
    command: list[str]
    remaining: Callable[[Any, int], int]
    env: dict[str, str] = field(default_factory=dict)
    tasks: int | None = None


def _ledger(client: Any, queue: str) -> Any:
    from django_ledger import Ledger

    return Ledger(client, NAMESPACE, queue, max_records=10_000_000)


def _admit_raw(client: Any, n: int) -> None:
    ledger = _ledger(client, "bench")
    for start in range(0, n, 128):
        ledger.admit_many([(f"job-{i:07d}", "") for i in range(start, min(n, start + 128))])


def _completed(queue: str) -> Callable[[Any, int], int]:
    from django_ledger import State

    key: str | None = None

    def remaining(client: Any, n: int) -> int:
        nonlocal key
        if key is None:
            key = _ledger(client, queue).terminal_keys[State.COMPLETED]
        return n - int(client.zcard(key))

    return remaining


def _admit_tasks(url: str) -> Callable[[Any, int], None]:
    def admit(client: Any, n: int) -> None:
        env = {**_django_env(url), **QUIET}
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.worker_bench", "--enqueue-tasks", str(n)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise RuntimeError(f"enqueue_many failed: {done.stderr.strip()[-2000:]}")

    return admit


def _enqueue_tasks(n: int) -> None:
    """In a subprocess with Django set up: admit ``n`` no-op Django tasks."""
    import django

    django.setup()
    from django_ledger.tasks import enqueue_many
    from tests.support.quiet_tasks.tasks import noop

    task = noop
    for start in range(0, n, 1024):
        enqueue_many(task, [((), {})] * (min(n, start + 1024) - start))


def _django_env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "REDIS_URL": url,
        "LEDGER_NAMESPACE": NAMESPACE,
        "DJANGO_SETTINGS_MODULE": "tests.support.bench_settings",
        "PYTHONPATH": str(ROOT),
    }


def _peers() -> Any:
    from benchmarks import worker_peers

    return worker_peers


def _admit_huey(client: Any, n: int) -> None:
    noop = _peers().huey_noop
    for _ in range(n):
        noop()


def _admit_dramatiq(client: Any, n: int) -> None:
    noop = _peers().dramatiq_noop
    for _ in range(n):
        noop.send()


def _admit_rq(client: Any, n: int) -> None:
    from rq import Queue

    queue = Queue("default", connection=client)
    for _ in range(n):
        queue.enqueue("benchmarks.worker_peers.rq_noop")


def _admit_celery(client: Any, n: int) -> None:
    noop = _peers().celery_noop
    for _ in range(n):
        noop.delay()


#: The Django-task rows' settings: the bench's plus ``tests.support.quiet_tasks``, an app that
#: connects no signal receivers (``tests.support.tasks_app``'s send two RPUSH a task: they would
#: measure the test app, not the backend).
QUIET = {"DJANGO_SETTINGS_MODULE": "tests.support.quiet_tasks_settings"}


def systems(url: str, rq_tasks: int) -> dict[str, System]:
    python = sys.executable
    worker = [python, "manage.py", "ledger_worker"]
    peer_env = {"BENCH_REDIS_URL": url, "PYTHONPATH": str(ROOT)}
    rq = [venv_bin("rq"), "worker", "--burst", "--url", url, "default"]
    return {
        "ledger": System("ledger", _admit_raw, [*worker, "bench"], _completed("bench")),
        "ledger-nocount": System(
            "ledger-nocount", _admit_raw, [*worker, "bench", "--no-counters"], _completed("bench")
        ),
        "ledger-quiet": System(
            "ledger-quiet", _admit_raw, [*worker, "bench", "-v", "0"], _completed("bench")
        ),
        "ledger-task": System(
            "ledger-task",
            _admit_tasks(url),
            [*worker, "quiet"],
            _completed("quiet"),
            env=QUIET,
        ),
        "ledger-task-c1": System(
            "ledger-task-c1",
            _admit_tasks(url),
            [*worker, "quiet", "--concurrency", "1", "--prefetch", "0"],
            _completed("quiet"),
            env=QUIET,
        ),
        "ledger-c1": System(
            "ledger-c1",
            _admit_raw,
            [*worker, "bench", "--concurrency", "1", "--prefetch", "0"],
            _completed("bench"),
        ),
        "huey": System(
            "huey",
            _admit_huey,
            [venv_bin("huey_consumer"), "benchmarks.worker_peers.huey", "-w", "1", "-k", "thread"],
            lambda client, n: int(client.llen("huey.redis.bench")),
            env=peer_env,
        ),
        "dramatiq": System(
            "dramatiq",
            _admit_dramatiq,
            [
                venv_bin("dramatiq"),
                "benchmarks.worker_peers:broker",
                "--processes",
                "1",
                "--threads",
                "8",
            ],
            lambda client, n: int(client.hlen("dramatiq:default.msgs")),
            env=peer_env,
        ),
        "rq": System(
            "rq",
            _admit_rq,
            rq,
            lambda client, n: n - int(client.zcard("rq:finished:default")),
            env=peer_env,
            tasks=rq_tasks,
        ),
        "rq-simple": System(
            "rq-simple",
            _admit_rq,
            [*rq, "--worker-class", "rq.worker.SimpleWorker"],
            lambda client, n: n - int(client.zcard("rq:finished:default")),
            env=peer_env,
            tasks=rq_tasks,
        ),
        "celery": System(
            "celery",
            _admit_celery,
            [
                venv_bin("celery"),
                "-A",
                "benchmarks.worker_peers:celery",
                "worker",
                "--pool",
                "threads",
                "--concurrency",
                "8",
            ],
            # Celery acknowledges on receipt (its default): what is left is what is
            # queued plus what is delivered and not yet acknowledged. Up to its prefetch
            # (4 x 8) may still be in the worker's hands when this reads 0.
            lambda client, n: int(client.llen("celery")) + int(client.hlen("unacked")),
            env=peer_env,
        ),
    }


# -- one run ------------------------------------------------------------------------------


@dataclass
class Run:
    system: str
    tasks: int
    rate: float = float("nan")
    wall: float = float("nan")
    commands: float = float("nan")
    scripts: float = float("nan")
    by_command: Counter[str] = field(default_factory=Counter)
    drained: bool = False


def _calls(client: Any) -> Counter[str]:
    stats = client.info("commandstats")
    return Counter({name: int(value["calls"]) for name, value in stats.items()})


def run_once(
    system: System, server: RedisServer, client: Any, n: int, logs: Path, monitor: bool = False
) -> tuple[Run, Counter[str] | None]:
    """Admit ``n`` tasks, start the worker, wait until drained; return the figures."""
    client.flushall()
    system.admit(client, n)
    left = system.remaining(client, n)
    if left != n:
        raise RuntimeError(f"{system.name}: admitted {n}, the queue holds {left}")
    watcher = Monitor(server.port, {client.client_info()["addr"]}) if monitor else None
    client.config_resetstat()
    result = Run(system.name, n)
    env = {**_django_env(server.url), **system.env}
    log = (logs / f"{system.name}.log").open("ab")
    started = time.perf_counter()
    process = subprocess.Popen(
        system.command,
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    polls = 0
    first: tuple[float, int, Counter[str], int] | None = None
    deadline = started + max(120.0, n / 20)
    try:
        while time.perf_counter() < deadline:
            left = system.remaining(client, n)
            polls += 1
            now = time.perf_counter()
            if first is None and left < n:
                first = (now, left, _calls(client), polls)
            if left <= 0:
                result.drained = True
                break
            if process.poll() is not None and system.name not in ("rq", "rq-simple"):
                break
            time.sleep(POLL)
        end = time.perf_counter()
        calls = _calls(client)
    finally:
        _stop(process)
        log.close()
    sent = watcher.stop() if watcher is not None else None
    if not result.drained or first is None:
        print(f"  {system.name}: NOT drained ({left} left); see {logs / (system.name + '.log')}")
        return result, sent
    at, left_then, calls_then, polls_then = first
    result.wall = end - started
    if left_then == 0:  # drained before the first look: no window to measure
        return result, sent
    result.rate = left_then / (end - at) if end > at else float("inf")
    window = calls - calls_then
    # Less the bench's own: the polls after the first look, and that look's INFO.
    poll_command = _POLL_COMMAND[system.name]
    window[poll_command] -= polls - polls_then
    window["cmdstat_info"] -= 1
    window = +window
    result.by_command = window
    result.commands = sum(window.values()) / left_then
    result.scripts = sum(window[name] for name in SCRIPT_COMMANDS) / left_then
    return result, sent


_POLL_COMMAND = {
    "ledger": "cmdstat_zcard",
    "ledger-nocount": "cmdstat_zcard",
    "ledger-quiet": "cmdstat_zcard",
    "ledger-task": "cmdstat_zcard",
    "ledger-c1": "cmdstat_zcard",
    "ledger-task-c1": "cmdstat_zcard",
    "huey": "cmdstat_llen",
    "dramatiq": "cmdstat_hlen",
    "rq": "cmdstat_zcard",
    "rq-simple": "cmdstat_zcard",
    "celery": "cmdstat_llen",
}


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the worker's process group, then SIGKILL what is left after 20 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


class Monitor:
    """Count the commands clients send (``MONITOR``), less those of ``exclude`` addresses
    and those that scripts run (shown as ``[0 lua]``)."""

    _LINE = re.compile(rb'^\+\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]*)"')

    def __init__(self, port: int, exclude: set[str]) -> None:
        self.exclude = {address.encode() for address in exclude}
        self.counts: Counter[str] = Counter()
        self._sock = socket.create_connection(("127.0.0.1", port))
        self._sock.sendall(b"MONITOR\r\n")
        self._sock.settimeout(0.2)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        buffer = b""
        while not self._done.is_set():
            try:
                chunk = self._sock.recv(1 << 16)
            except TimeoutError:
                continue
            if not chunk:
                break
            buffer += chunk
            *lines, buffer = buffer.split(b"\r\n")
            for line in lines:
                found = self._LINE.match(line)
                if found is None:
                    continue
                address, command = found.groups()
                if address == b"lua" or address in self.exclude:
                    continue
                self.counts[command.decode().lower()] += 1

    def stop(self) -> Counter[str]:
        time.sleep(0.3)  # what is in flight
        self._done.set()
        self._thread.join()
        self._sock.close()
        return self.counts


# -- the rounds ---------------------------------------------------------------------------


def bench(args: argparse.Namespace) -> int:
    from tests.support.redis_server import RedisServer

    chosen = [name for name in SYSTEMS if name in args.only.split(",")] if args.only else SYSTEMS
    server = RedisServer()
    server.start()
    if args.pin:
        assert server.pid is not None
        os.sched_setaffinity(server.pid, {0})
        os.sched_setaffinity(0, {1})
    logs = Path(args.logs or f"/tmp/worker-bench-{os.getpid()}")
    logs.mkdir(parents=True, exist_ok=True)
    os.environ["BENCH_REDIS_URL"] = server.url
    try:
        client = server.client()
        info = client.info("server")
        print(
            f"redis-server {info['redis_version']} on port {server.port}, tasks={args.tasks}, "
            f"rounds={args.rounds}, pinned={args.pin} (Redis CPU 0, workers and bench CPU 1), "
            f"python {sys.version.split()[0]}, logs in {logs}"
        )
        table = systems(server.url, args.rq_tasks)
        chosen = _usable(chosen, table, server, client, logs)
        runs: dict[str, list[Run]] = {name: [] for name in chosen}
        for round_number in range(args.rounds):
            turn = round_number % len(chosen)
            order = chosen[turn:] + chosen[:turn]
            for name in order:
                system = table[name]
                result, _ = run_once(system, server, client, system.tasks or args.tasks, logs)
                runs[name].append(result)
                print(
                    f"round {round_number + 1} {name:<12} {result.rate:>9,.0f} tasks/s  "
                    f"wall {result.wall:6.2f} s  {result.commands:5.2f} cmds/task  "
                    f"{result.scripts:5.2f} scripts/task",
                    flush=True,
                )
        sent: dict[str, Counter[str]] = {}
        if args.count:
            for name in chosen:
                system = table[name]
                n = min(system.tasks or args.tasks, 2000)
                _, counts = run_once(system, server, client, n, logs, monitor=True)
                sent[name] = Counter({k: v / n for k, v in (counts or Counter()).items()})
        report(runs, sent)
        client.close()
    finally:
        server.stop()
        server.cleanup()
    return 0


def _usable(
    chosen: list[str], table: dict[str, System], server: RedisServer, client: Any, logs: Path
) -> list[str]:
    """Drop a system that cannot run at all here (say why): a quick run of 20 tasks."""
    usable = []
    for name in chosen:
        try:
            result, _ = run_once(table[name], server, client, 20, logs)
        except Exception as exc:
            print(f"skipping {name}: {type(exc).__name__}: {str(exc)[-500:]}")
            continue
        if not result.drained:
            print(f"skipping {name}: 20 tasks did not drain; see {logs / (name + '.log')}")
            continue
        usable.append(name)
    return usable


#: The raw ``HANDLER`` row each Django-task row is set against (``/raw``); the
#: counters-off row is set against the counters-on one (``ledger``) the same way.
RAW = {"ledger-task": "ledger", "ledger-task-c1": "ledger-c1", "ledger-nocount": "ledger"}


def report(runs: dict[str, list[Run]], sent: dict[str, Counter[str]]) -> None:
    def ratios(name: str, peer: str) -> str:
        if peer not in runs or not runs[peer]:
            return "-"
        pairs = [
            a.rate / b.rate
            for a, b in zip(runs[name], runs[peer], strict=True)
            if a.drained and b.drained
        ]
        return f"{median(pairs):.2f}" if pairs else "-"

    print(
        f"\n{'system':<15}{'tasks':>7}{'tasks/s':>10}{'wall s':>8}{'/huey':>7}{'/dramatiq':>10}"
        f"{'/raw':>6}"
        f"{'cmds/task':>11}{'scripts/task':>14}{'sent/task':>11}  most sent per task"
    )
    for name, results in runs.items():
        done = [r for r in results if r.drained]
        if not done:
            print(f"{name:<15} never drained")
            continue
        counts = sent.get(name, Counter())
        top = ", ".join(f"{k} {v:.2f}" for k, v in counts.most_common(4))
        print(
            f"{name:<15}{done[0].tasks:>7,}{median(r.rate for r in done):>10,.0f}"
            f"{median(r.wall for r in done):>8.2f}{ratios(name, 'huey'):>7}"
            f"{ratios(name, 'dramatiq'):>10}{ratios(name, RAW.get(name, '')):>6}"
            f"{median(r.commands for r in done):>11.2f}"
            f"{median(r.scripts for r in done):>14.2f}"
            f"{sum(counts.values()) if counts else float('nan'):>11.2f}  {top}"
        )
    print(
        "\ntasks/s: drain rate after the first task is seen done (start-up excluded), median "
        "of the rounds; wall: from process start to drained; /huey, /dramatiq: medians of the "
        "per-round ratios of tasks/s; /raw: a Django-task row against the raw HANDLER row of "
        "the same concurrency, same rounds (on ledger-nocount: counters off against on); "
        "cmds/task: INFO commandstats over the drain (commands "
        "scripts ran included); scripts/task: FCALL + EVALSHA + EVAL; sent/task: commands clients "
        "sent, counted with MONITOR in one more untimed run."
    )
    cost = ratios("ledger", "ledger-nocount") if "ledger" in runs else "-"
    if cost != "-":
        print(
            f"counters cost: ledger / ledger-nocount tasks/s = {cost} (median of the rounds' "
            f"ratios): the counters cost {1 - float(cost):.1%} of the throughput (below 0: noise)"
        )


# -- profile ------------------------------------------------------------------------------


def _drain_in_process(
    client: Any, n: int, worker_class: type[Any], concurrency: int, prefetch: int | None
) -> tuple[Any, list[float]]:
    """Admit ``n`` tasks; return a burst worker on them, and [seconds, calls] it will spend
    in ``settle_and_claim``."""
    from django_ledger import Ledger
    from django_ledger.core.worker import CallableHandler, WorkerConfig

    client.flushall()
    _admit_raw(client, n)
    client.config_resetstat()
    ledger = Ledger(client, NAMESPACE, "bench", max_records=10_000_000)
    waited = _time_settle_and_claim(ledger)
    handler = CallableHandler(lambda job: None, max_attempts=16)
    config = WorkerConfig(concurrency=concurrency, prefetch=prefetch, burst=True, repair=False)
    worker = worker_class({"bench": ledger}, {"bench": handler}, {"bench": 30.0}, config)
    return worker, waited


def _time_settle_and_claim(ledger: Any) -> list[float]:
    """Wrap ``ledger.settle_and_claim`` to add up its seconds and calls: [seconds, calls]."""
    waited = [0.0, 0.0]
    real = ledger.settle_and_claim

    def timed(*a: Any, **kw: Any) -> Any:
        began = time.perf_counter()
        try:
            return real(*a, **kw)
        finally:
            waited[0] += time.perf_counter() - began
            waited[1] += 1

    ledger.settle_and_claim = timed
    return waited


def _drain_tasks_in_process(
    client: Any, n: int, concurrency: int, prefetch: int | None
) -> tuple[Any, list[float]]:
    """``_drain_in_process`` for Django tasks: ``n`` no-op tasks of ``tests.support.quiet_tasks``
    (no signal receivers but Django's own), a burst worker as ``ledger_worker`` builds it
    (its ``TaskHandler``), repair, relay and counters off."""
    from django_ledger.services.worker import WorkerOptions, build_worker
    from django_ledger.tasks import enqueue_many
    from tests.support.quiet_tasks.tasks import noop

    client.flushall()
    for start in range(0, n, 1024):
        enqueue_many(noop, [((), {})] * (min(n, start + 1024) - start))
    client.config_resetstat()
    options = WorkerOptions(
        queues=[noop.queue_name],
        concurrency=concurrency,
        prefetch=prefetch,
        burst=True,
        repair=False,
        relay=False,
        counters=False,
    )
    worker = build_worker(options)
    ledger = worker.ledgers[noop.queue_name]
    waited = _time_settle_and_claim(ledger)
    return worker, waited


def _drain(
    client: Any, n: int, label: str, worker_class: type[Any], concurrency: int, prefetch: int | None
) -> tuple[Any, list[float]]:
    if label == "task":
        return _drain_tasks_in_process(client, n, concurrency, prefetch)
    return _drain_in_process(client, n, worker_class, concurrency, prefetch)


@contextlib.contextmanager
def _profiling_threads() -> Iterator[list[cProfile.Profile]]:
    """Profile the calling thread and every thread started meanwhile (one profiler each:
    cProfile sees only the thread it was enabled in)."""
    profilers = [cProfile.Profile()]
    run = threading.Thread.run

    def profiled(thread: threading.Thread) -> None:
        profiler = cProfile.Profile()
        profilers.append(profiler)
        profiler.enable()
        try:
            run(thread)
        finally:
            profiler.disable()

    threading.Thread.run = profiled  # type: ignore[method-assign,assignment]
    profilers[0].enable()
    try:
        yield profilers
    finally:
        profilers[0].disable()
        threading.Thread.run = run  # type: ignore[method-assign]


def profile(args: argparse.Namespace) -> int:
    """Drain ``--tasks`` through in-process ``Worker``s: figures, then cProfile."""
    from django_ledger.core.worker import Worker
    from tests.support.redis_server import RedisServer

    server = RedisServer()
    server.start()
    if args.pin:
        assert server.pid is not None
        os.sched_setaffinity(server.pid, {0})
        os.sched_setaffinity(0, {1})
    n = args.tasks
    variants = [
        ("runtime", Worker, 8, None),
        ("runtime", Worker, 1, 0),
        ("task", Worker, 8, None),
        ("task", Worker, 1, 0),
    ]
    # The Django-task variants: Django set up here, on the quiet tasks app's settings.
    os.environ.update({**_django_env(server.url), **QUIET})
    import django

    django.setup()
    try:
        client = server.client()
        print(
            f"in-process Worker (no subprocess, no log handler, repair off), {n} no-op tasks, "
            f"{args.rounds} alternating rounds, pinned={args.pin}"
        )
        figures: dict[tuple[str, int], list[tuple[float, float, float, float, float]]] = {}
        for _ in range(args.rounds):
            for label, worker_class, concurrency, prefetch in variants:
                worker, waited = _drain(client, n, label, worker_class, concurrency, prefetch)
                began, cpu = time.perf_counter(), time.process_time()
                worker.run()
                wall = time.perf_counter() - began
                cpu = time.process_time() - cpu
                stats = client.info("commandstats").get("cmdstat_fcall", {})
                figures.setdefault((label, concurrency), []).append(
                    (
                        n / wall,
                        cpu / n * 1e6,
                        waited[0] / wall,
                        stats.get("calls", 0) / n,
                        stats.get("usec_per_call", 0.0),
                    )
                )
        print(
            f"\n{'variant':<10}{'conc.':>6}{'tasks/s':>10}{'CPU us/task':>13}"
            f"{'in settle_and_claim':>21}{'FCALL/task':>14}{'server us/call':>16}"
        )
        for (label, concurrency), rows in figures.items():
            print(
                f"{label:<10}{concurrency:>6}{median(r[0] for r in rows):>10,.0f}"
                f"{median(r[1] for r in rows):>13.0f}{median(r[2] for r in rows):>21.0%}"
                f"{median(r[3] for r in rows):>14.2f}{median(r[4] for r in rows):>16.0f}"
            )
        for label, worker_class, concurrency, prefetch in variants:
            worker, _ = _drain(client, n, label, worker_class, concurrency, prefetch)
            with _profiling_threads() as profilers:
                worker.run()
            out = io.StringIO()
            merged = pstats.Stats(*profilers, stream=out)
            merged.sort_stats("tottime").print_stats(args.profile_lines)
            print(f"\n== cProfile, {label}, concurrency {concurrency}: every thread of the worker")
            print("\n".join(out.getvalue().splitlines()[6:]).rstrip())
        client.close()
    finally:
        server.stop()
        server.cleanup()
    return 0


# -- setup --------------------------------------------------------------------------------


def setup() -> int:
    """Make ``.venv-bench`` with the peers and the project (editable) in it."""
    if not (VENV / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    pip = [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, *PEERS, "django-tasks", "-e", str(ROOT)], check=True)
    print(f"ready: {VENV / 'bin' / 'python'} -m benchmarks.worker_bench")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=5_000, help="tasks per run (default 5,000)")
    parser.add_argument(
        "--rq-tasks", type=int, default=500, help="tasks per run of rq (default 500)"
    )
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (medians)")
    parser.add_argument("--only", default="", help="comma-separated systems: " + ",".join(SYSTEMS))
    parser.add_argument("--no-pin", dest="pin", action="store_false", help="do not pin CPUs")
    parser.add_argument("--no-count", dest="count", action="store_false", help="no MONITOR run")
    parser.add_argument("--logs", default="", help="where the workers' output goes")
    parser.add_argument("--profile", action="store_true", help="profile an in-process Worker")
    parser.add_argument("--profile-lines", type=int, default=25)
    parser.add_argument("--setup", action="store_true", help="make .venv-bench, then exit")
    parser.add_argument("--enqueue-tasks", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.setup:
        return setup()
    if args.enqueue_tasks:
        _enqueue_tasks(args.enqueue_tasks)
        return 0
    peers = ("huey", "dramatiq", "rq", "celery")
    if not args.profile and not all(_importable(name) for name in peers):
        print(
            "the peers are not installed in this interpreter: run "
            "`python3 -m benchmarks.worker_bench --setup`, then "
            "`.venv-bench/bin/python -m benchmarks.worker_bench`"
        )
        return 2
    return profile(args) if args.profile else bench(args)


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
