"""Latency of a task, from before it is enqueued until its result reads as done.

Run from the repository root, with the peers in a scratch virtualenv (django-tasks-redis
needs Django 6.0+ on Python 3.12+; docs/performance.md says how it was made):

    python -m benchmarks.latency_bench                      # every system installed
    python -m benchmarks.latency_bench --tasks 50 --only busy
    python -m benchmarks.latency_bench --systems ledger --idle-seconds 20

It starts its own redis-server on a free port (never 6379), pins it to CPU 0 and itself
(and so every worker process it starts) to CPU 1 (``sched_setaffinity``, what
``taskset`` does). The systems, one worker process each with its defaults, all running
at once on ``benchmarks.latency_settings``:

* **ledger**: ``django-admin ledger_worker``; ``noop.enqueue()``, then
  ``noop.get_result(id).status`` (``tests.support.bench_tasks_app``: a no-op task, no signal
  receivers);
* **django-tasks-redis**: ``django-admin run_redis_tasks --backend dtr --continuous``;
  the same task with ``.using(backend="dtr")``, read the same way;
* **celery**: ``celery -A benchmarks.latency_peers:celery worker`` (prefork, its
  default pool), a Redis result backend; ``delay()``, then ``AsyncResult(id).state``.

Two modes, ``--tasks`` tasks per system (200): **busy**, a system's tasks 0 to 50 ms
apart, and **idle**, 1 to 1.5 s apart. The systems take turns task by task (the order
turns by one each cycle), with a third of the gap slept before each, so every system
sees the same machine. One task: ``perf_counter``, enqueue, then read the result every
1 ms until done. Prints median, p99 and max per system and mode, and the ratio of the
ledger's median and p99 to each peer's. Then, with only the ledger's worker left
running, ``--idle-seconds`` of nothing to do: the commands Redis received meanwhile, by
``MONITOR`` (what scripts ran left out; ``INFO commandstats`` counts that too), per
block time-out of its wake-up wait (``core/wake.py``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SYSTEMS = ("ledger", "django-tasks-redis", "celery")
GAPS = {"busy": (0.0, 0.05), "idle": (1.0, 1.5)}


@dataclass
class System:
    """One system: its worker's command line, and one task's enqueue and read."""

    name: str
    command: list[str]
    enqueue: Callable[[], Any]
    done: Callable[[Any], bool]
    times: dict[str, list[float]] = field(default_factory=dict)

    def one(self) -> float:
        """One task's latency in seconds: enqueue, then read the result every 1 ms."""
        began = time.perf_counter()
        handle = self.enqueue()
        while not self.done(handle):
            time.sleep(0.001)
        return time.perf_counter() - began


def _systems(names: list[str]) -> list[System]:
    from django_ledger.tasks.compat import TaskResultStatus
    from tests.support.bench_tasks_app.tasks import noop

    django_admin = [sys.executable, "-m", "django"]
    made: list[System] = []
    successful = TaskResultStatus.SUCCESSFUL
    for name in names:
        if name == "ledger":
            made.append(
                System(
                    name,
                    [*django_admin, "ledger_worker"],
                    noop.enqueue,
                    lambda result: noop.get_result(result.id).status == successful,
                )
            )
        elif name == "django-tasks-redis":
            from django.conf import settings

            if not getattr(settings, "DTR", False):
                print("django-tasks-redis is not installed (Django 6.0+): skipped")
                continue
            dtr = noop.using(backend="dtr")
            made.append(
                System(
                    name,
                    [*django_admin, "run_redis_tasks", "--backend", "dtr", "--continuous"],
                    dtr.enqueue,
                    lambda result, dtr=dtr: dtr.get_result(result.id).status == successful,
                )
            )
        elif name == "celery":
            if importlib.util.find_spec("celery") is None:
                print("celery is not installed: skipped")
                continue
            from benchmarks import latency_peers

            app, celery_noop = latency_peers.celery, latency_peers.celery_noop
            made.append(
                System(
                    name,
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        "benchmarks.latency_peers:celery",
                        "worker",
                        "-l",
                        "warning",
                    ],
                    celery_noop.delay,
                    lambda result, app=app: app.AsyncResult(result.id).state == "SUCCESS",
                )
            )
        else:
            raise SystemExit(f"unknown system {name!r} (known: {', '.join(SYSTEMS)})")
    return made


def _start(system: System, logs: Path) -> subprocess.Popen[bytes]:
    with (logs / f"{system.name}.log").open("wb") as out:
        return subprocess.Popen(
            system.command, cwd=ROOT, env=os.environ, stdout=out, stderr=subprocess.STDOUT
        )


def _ready(system: System, worker: subprocess.Popen[bytes], within: float = 120) -> None:
    """Wait for the worker to run one task (started, imports warm)."""
    deadline = time.monotonic() + within
    handle = system.enqueue()
    while not system.done(handle):
        if worker.poll() is not None:
            raise SystemExit(f"{system.name}: the worker exited ({worker.returncode})")
        if time.monotonic() > deadline:
            raise SystemExit(f"{system.name}: no task done within {within:.0f} s")
        time.sleep(0.01)


def _measure(systems: list[System], mode: str, tasks: int) -> None:
    low, high = GAPS[mode]
    share = len(systems)
    for system in systems:
        system.times[mode] = []
    for cycle in range(tasks):
        turn = cycle % share
        for system in systems[turn:] + systems[:turn]:
            time.sleep(random.uniform(low, high) / share)
            system.times[mode].append(system.one())


def _stats(times: list[float]) -> tuple[float, float, float]:
    ms = sorted(t * 1000 for t in times)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return statistics.median(ms), p99, ms[-1]


def _idle_commands(server: Any, seconds: float) -> list[str]:
    """What the ledger's idle worker alone sent to Redis, per block time-out.

    Counted with ``MONITOR`` (the commands scripts ran are not sent: they are left out)
    and, for context, ``INFO commandstats`` over the same time (which counts them).
    """
    from django_ledger.core.wake import BLOCK_MOST

    client = server.client()
    sent: dict[str, int] = {}
    client.config_resetstat()
    ends = time.monotonic() + seconds
    with client.monitor() as monitor:
        while time.monotonic() < ends:
            command = monitor.next_command()
            if command["client_type"] == "lua" or command["command"].startswith("MONITOR"):
                continue
            name = command["command"].split(" ", 1)[0].upper()
            sent[name] = sent.get(name, 0) + 1
    stats = client.info("commandstats")
    counted = sum(
        int(value["calls"])
        for name, value in stats.items()
        if name.removeprefix("cmdstat_") not in ("info", "config|resetstat", "monitor")
    )
    total = sum(sent.values())
    blocks = seconds / BLOCK_MOST
    shown = ", ".join(
        f"{name} {count}" for name, count in sorted(sent.items(), key=lambda c: -c[1])
    )
    return [
        f"idle ledger worker, {seconds:.0f} s: sent {total} commands ({shown}): "
        f"{total / blocks:.2f} per block time-out of {BLOCK_MOST:g} s, "
        f"{sent.get('BZPOPMIN', 0) / blocks:.2f} of them BZPOPMIN; INFO commandstats, "
        f"which counts what scripts ran too: {counted}"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks per mode and system")
    parser.add_argument("--only", default="busy,idle", help="modes: busy,idle")
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="systems to measure")
    parser.add_argument(
        "--idle-seconds", type=float, default=10, help="the idle worker's count (0: skip)"
    )
    parser.add_argument("--no-pin", dest="pin", action="store_false")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    from tests.support.redis_server import RedisServer

    server = RedisServer()
    server.start()
    scratch = Path(tempfile.mkdtemp(prefix="latency-bench-"))
    workers: dict[str, subprocess.Popen[bytes]] = {}
    try:
        if args.pin:
            assert server.pid is not None
            os.sched_setaffinity(server.pid, {0})
            os.sched_setaffinity(0, {1})
        os.environ.update(
            REDIS_URL=server.url,
            LEDGER_NAMESPACE=f"lat{uuid.uuid4().hex[:8]}",
            DJANGO_SETTINGS_MODULE="benchmarks.latency_settings",
            PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            PYTHONUNBUFFERED="1",
        )
        import django

        django.setup()
        systems = _systems([name for name in args.systems.split(",") if name])
        print(
            f"redis-server on port {server.port}, pinned={args.pin} (Redis CPU 0, the rest "
            f"CPU 1), {args.tasks} tasks per mode and system, python "
            f"{sys.version.split()[0]}, Django {django.__version__}, logs in {scratch}",
            flush=True,
        )
        for system in systems:
            workers[system.name] = _start(system, scratch)
        for system in systems:
            _ready(system, workers[system.name])
        lines = []
        for mode in [mode for mode in GAPS if mode in args.only.split(",")]:
            _measure(systems, mode, args.tasks)
            ledger = next((s for s in systems if s.name == "ledger"), None)
            for system in systems:
                median, p99, most = _stats(system.times[mode])
                line = (
                    f"{system.name:<19} {mode:<5} n={len(system.times[mode]):<4} median "
                    f"{median:7.2f} ms  p99 {p99:7.2f} ms  max {most:7.2f} ms"
                )
                if ledger is not None and system is not ledger:
                    own = _stats(ledger.times[mode])
                    line += f"  ledger/this: median {own[0] / median:.2f} p99 {own[1] / p99:.2f}"
                print(line, flush=True)
                lines.append(line)
        if args.idle_seconds > 0 and "ledger" in workers:
            for name, worker in workers.items():
                if name != "ledger":
                    worker.terminate()
                    worker.wait(60)
            time.sleep(2)  # the ledger's worker idle again (its last block timed out)
            lines += _idle_commands(server, args.idle_seconds)
        print("\n".join(["", *lines]))
    finally:
        for worker in workers.values():
            if worker.poll() is None:
                worker.terminate()
                try:
                    worker.wait(30)
                except subprocess.TimeoutExpired:
                    worker.kill()
        server.stop()
        server.cleanup()
        if os.environ.get("LATENCY_KEEP_LOGS") is None:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
