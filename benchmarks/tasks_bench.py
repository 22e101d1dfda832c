"""Enqueue throughput: ``task.enqueue()`` on the ledger beside huey, RQ and Celery.

Run from the repository root (docs/tasks.md and docs/performance.md show the figures),
with the peers in ``.venv-bench`` (``python3 -m benchmarks.worker_bench --setup`` makes it):

    .venv-bench/bin/python -m benchmarks.tasks_bench         # client and Redis float
    .venv-bench/bin/python -m benchmarks.tasks_bench --pin   # Redis on CPU 0, client on 1

It starts its own redis-server on a free port and stops it at the end. Each system
enqueues the same small call (two ints) to the same Redis, one call at a time, and the
ledger also in bulk (``enqueue_many``, 128 per round trip). Rounds alternate between the
systems so that a busy machine slows all of them alike; the table shows the median rate
of each and the median per-round ratio to huey's, and from Redis's ``INFO commandstats``
over each system's rounds: the commands per call (those scripts run included), the
script calls (``FCALL``) per call and the server time of one script call. RQ and
Celery are measured when installed (they are not the project's dependencies).

* ledger enqueue: ``task.enqueue(1, 2)`` through Django's API: one admission script call;
* ledger bulk: ``enqueue_many(task, calls)``, per call;
* ledger.admit: the core's ``Ledger.admit`` of the same payload, with no task layer
  (what an enqueue costs below Django's API);
* huey: ``RedisHuey`` task call (LPUSH of a pickled message);
* rq: ``Queue.enqueue(func, 1, 2)`` (a job hash and a queue push, pipelined);
* celery: ``task.delay(1, 2)`` on a Redis broker with results off.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.redis_server import RedisServer

BATCH = 128


def add(a: int, b: int) -> int:
    """The call every system enqueues (none of them runs it here)."""
    return a + b


def bench_add(a: int, b: int) -> int:
    """``add`` for the ledger: made a task once Django is set up (see ``systems``)."""
    return a + b


def configure_django(url: str) -> None:
    import django
    from django.conf import settings

    apps = ["django.contrib.contenttypes", "django.contrib.auth", "django_ledger"]
    if django.VERSION < (6, 0):
        apps.append("django_tasks")
    settings.configure(
        INSTALLED_APPS=apps,
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}},
        USE_TZ=True,
        LEDGER={
            "CONNECTION": url,
            "NAMESPACE": "bench",
            "QUEUES": {"default": {"MAX_RECORDS": 10_000_000}},
        },
        TASKS={"default": {"BACKEND": "django_ledger.tasks.LedgerBackend"}},
    )
    django.setup()


def systems(url: str, calls: int) -> dict[str, Callable[[], int]]:
    """Return each system's round: enqueue ``calls`` calls, return how many."""
    from django_ledger.tasks import enqueue_many, task

    # Bound under its function's name, as @task would: a worker finds it by that path.
    ledger_add = globals()["bench_add"] = task(bench_add)
    bulk = [((1, 2), {})] * BATCH

    def ledger_one() -> int:
        for _ in range(calls):
            ledger_add.enqueue(1, 2)
        return calls

    def ledger_bulk() -> int:
        for _ in range(calls // BATCH):
            enqueue_many(ledger_add, bulk)
        return calls // BATCH * BATCH

    from django_ledger import get_ledger
    from django_ledger.core.jobs import encode_task

    ledger = get_ledger("default")
    payload = encode_task("__main__.bench_add", [1, 2], {})
    counter = iter(range(10**12))

    def admit_one() -> int:
        for _ in range(calls):
            ledger.admit(f"raw-{next(counter)}", payload)
        return calls

    found: dict[str, Callable[[], int]] = {
        "ledger enqueue": ledger_one,
        "ledger bulk": ledger_bulk,
        "ledger.admit": admit_one,
    }

    from huey import RedisHuey

    huey = RedisHuey("bench", url=url)
    huey_add = huey.task()(add)

    def huey_one() -> int:
        for _ in range(calls):
            huey_add(1, 2)
        return calls

    found["huey"] = huey_one
    try:
        import redis
        from rq import Queue
    except ImportError:
        print("rq is not installed: pip install rq (it is measured when present)")
    else:
        queue = Queue("bench", connection=redis.Redis.from_url(url))

        def rq_one() -> int:
            for _ in range(calls):
                queue.enqueue("benchmarks.tasks_bench.add", 1, 2)  # not __main__.add
            return calls

        found["rq"] = rq_one
    try:
        from celery import Celery
    except ImportError:
        print("celery is not installed: pip install celery (it is measured when present)")
    else:
        app = Celery("bench", broker=url)
        app.conf.task_ignore_result = True
        celery_add = app.task(add)

        def celery_one() -> int:
            for _ in range(calls):
                celery_add.delay(1, 2)
            return calls

        found["celery"] = celery_one
    return found


#: Commands of the bench itself, left out of the counts.
OWN_COMMANDS = ("cmdstat_config|resetstat", "cmdstat_info", "cmdstat_flushall")


def server_counts(client: Any) -> tuple[int, int, float]:
    """Return the commands, the script calls and their microseconds since the last reset."""
    stats = client.info("commandstats")
    commands = sum(v["calls"] for k, v in stats.items() if k not in OWN_COMMANDS)
    script = stats.get("cmdstat_fcall", {"calls": 0, "usec": 0})
    return commands, int(script["calls"]), float(script["usec"])


def run(rounds: int, calls: int, pin: bool) -> tuple[dict[str, list[float]], dict[str, Any]]:
    server = RedisServer()
    server.start()
    try:
        if pin and hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(server.pid or 0, {0})
            os.sched_setaffinity(0, {1})
        configure_django(server.url)
        rounds_of = systems(server.url, calls)
        client = server.client()
        for work in rounds_of.values():  # warm up: connections, scripts, imports
            work()
        rates: dict[str, list[float]] = {name: [] for name in rounds_of}
        counts = {name: [0, 0, 0, 0.0] for name in rounds_of}  # calls, commands, scripts, usec
        for _ in range(rounds):
            client.flushall()
            for name, work in rounds_of.items():
                client.config_resetstat()
                start = time.perf_counter()
                done = work()
                rates[name].append(done / (time.perf_counter() - start))
                commands, scripts, usec = server_counts(client)
                for index, value in enumerate((done, commands, scripts, usec)):
                    counts[name][index] += value
        client.close()
    finally:
        server.stop()
        server.cleanup()
    return rates, counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=2048, help="calls per system per round")
    parser.add_argument("--pin", action="store_true", help="Redis on CPU 0, the client on 1")
    options = parser.parse_args()
    rates, counts = run(options.rounds, options.calls, options.pin)
    huey = rates["huey"]
    print(
        f"{'system':<16}{'calls/s':>12}{'x huey':>9}{'spread':>13}{'us/call':>10}"
        f"{'cmds/call':>11}{'scripts/call':>14}{'us/script':>11}"
    )
    for name, values in rates.items():
        ratios = [value / base for value, base in zip(values, huey, strict=True)]
        rate = median(values)
        done, commands, scripts, usec = counts[name]
        per_script = f"{usec / scripts:.1f}" if scripts else "-"
        print(
            f"{name:<16}{rate:>12,.0f}{median(ratios):>9.2f}"
            f"{f'{min(ratios):.2f}-{max(ratios):.2f}':>13}{1e6 / rate:>10.1f}"
            f"{commands / done:>11.2f}{scripts / done:>14.3f}{per_script:>11}"
        )
    one = median(a / b for a, b in zip(rates["ledger enqueue"], huey, strict=True))
    bulk = median(a / b for a, b in zip(rates["ledger bulk"], huey, strict=True))
    print(f"target enqueue() >= huey: {'met' if one >= 1 else 'missed'} ({one:.2f}x)")
    print(f"target bulk >= 5x huey:   {'met' if bulk >= 5 else 'missed'} ({bulk:.2f}x)")


if __name__ == "__main__":
    main()
