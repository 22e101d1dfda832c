"""The outbox's cost on PostgreSQL: enqueue inside ``atomic()``, the relay, fenced effects.

Run from the repository root (docs/transactions.md shows the figures):

    /work/venv311/bin/python -m benchmarks.transactions_bench            # 5 rounds
    /work/venv311/bin/python -m benchmarks.transactions_bench --rounds 7 --calls 1000

django-tasks-db is compared when importable: with the project's venv, for example
``pip install --target /tmp/peers --no-deps django-tasks-db`` and ``PYTHONPATH=/tmp/peers``.

It starts a private PostgreSQL cluster (``tests/support/postgres_server.py``: ``initdb`` in a temp
dir, fsync and synchronous_commit off) and a private redis-server
(``tests/support/redis_server.py``), pins both servers to CPU 0 (the postmaster before the first
connection, so its backends inherit it) and this process to CPU 1
(``os.sched_setaffinity``; ``--no-pin``: nothing pinned), migrates, and measures in
alternating rounds (a busy machine slows every system alike). By hand, ``--mysql
root@127.0.0.1:3306`` runs the same on a MySQL or MariaDB server instead (a database of
its own, dropped at the end; mysqlclient, or PyMySQL on ``PYTHONPATH``). Each figure is the median
over the rounds; each ratio is the median of the per-round ratios. "client CPU us" is
this process's CPU time per call (``time.process_time``): the work of the client's own,
which a loaded machine stretches less than the round trips.

* outbox per call: ``with atomic(): add.enqueue(1, 2)``, one task per transaction, with
  the default ``OUTBOX_DELIVERY`` (``background``: the process's courier thread admits
  and deletes the committed rows in batches); the round ends when the courier has
  delivered every row (``flush_outbox()``), so its work is in the time and the CPU;
* outbox per call, inline: the same with ``OUTBOX_DELIVERY: "inline"`` (the committing
  thread's on-commit delivery: one ``admit_many``, one ``DELETE`` per transaction);
* outbox, stage only: the same without its on-commit delivery (the callback dropped
  before the commit): the transaction's part; the difference is the delivery's part
  (one ``admit_many``, one ``DELETE`` in autocommit);
* outbox bulk: ``with atomic(): enqueue_many(add, 100 calls)``, per task;
* plain enqueue: ``add.enqueue(1, 2)`` outside a transaction (Redis only);
* plain INSERT: ``with atomic():`` one ``INSERT`` of a small row, no task (the floor of
  any transaction that writes);
* tasks-db per call / bulk: django-tasks-db's ``enqueue()`` on the same database, one
  per transaction / 100 in one transaction (when installed);
* relay: rows staged by ``enqueue_many`` in transactions whose on-commit delivery is
  dropped before the commit, then ``Relay([db], batch=500).run_once()`` (the default
  batch), and batch 2000; rows/s;
* effects: a body doing one ``UPDATE`` of a counter row in ``atomic()``, with and
  without ``effects(context)`` around it (a fresh task id per call, a small result kept).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.postgres_server import PostgresServer, find_bindir
from tests.support.redis_server import RedisServer

BULK = 100
#: This process's CPU time per call of each system, per round (time.process_time):
#: the client's own work, apart from the round trips a busy machine stretches.
CPU: dict[str, list[float]] = {}
RELAY_BATCHES = (500, 2000)  # the default batch, and a larger one


def bench_add(a: int, b: int) -> int:
    """The call every system enqueues (none of them runs it here)."""
    return a + b


def db_add(a: int, b: int) -> int:
    """``bench_add`` for django-tasks-db (a task is bound to one backend)."""
    return a + b


def has_tasks_db() -> bool:
    try:
        import django_tasks_db  # noqa: F401
    except ImportError:
        return False
    return True


def configure_django(redis_url: str, database: dict[str, Any], tasks_db: bool) -> None:
    import django
    from django.conf import settings

    apps = ["django.contrib.contenttypes", "django.contrib.auth", "django_ledger"]
    if django.VERSION < (6, 0):
        apps.append("django_tasks")
    tasks: dict[str, Any] = {
        "default": {
            "BACKEND": "django_ledger.tasks.LedgerBackend",
            "OPTIONS": {"TRANSACTIONS": "outbox", "DATABASE": "default"},
        },
        "inline": {
            "BACKEND": "django_ledger.tasks.LedgerBackend",
            "OPTIONS": {
                "TRANSACTIONS": "outbox",
                "DATABASE": "default",
                "OUTBOX_DELIVERY": "inline",
            },
        },
    }
    if tasks_db:
        apps.append("django_tasks_db")
        tasks["db"] = {"BACKEND": "django_tasks_db.DatabaseBackend"}
    settings.configure(
        INSTALLED_APPS=apps,
        DATABASES={"default": {**database, "CONN_MAX_AGE": None}},
        USE_TZ=True,
        LEDGER={
            "CONNECTION": redis_url,
            "NAMESPACE": "txbench",
            "QUEUES": {"default": {"MAX_RECORDS": 10_000_000}},
        },
        TASKS=tasks,
        LOGGING_CONFIG=None,
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    with _cursor() as cursor:
        serial = "bigint AUTO_INCREMENT" if database["ENGINE"].endswith("mysql") else "bigserial"
        cursor.execute(f"CREATE TABLE bench_row (id {serial} PRIMARY KEY, a int, b int)")
        cursor.execute("CREATE TABLE bench_counter (id int PRIMARY KEY, n bigint)")
        cursor.execute("INSERT INTO bench_counter VALUES (1, 0)")


def _cursor() -> Any:
    from django.db import connection

    return connection.cursor()


def systems(calls: int, tasks_db: bool) -> dict[str, Callable[[], int]]:
    """Each system's round: do ``calls`` enqueues (or effects), return how many."""
    from django.db import transaction

    from django_ledger.tasks import enqueue_many, flush_outbox, task

    add = globals()["bench_add"] = task(bench_add)
    add_inline = add.using(backend="inline")
    bulk = [((1, 2), {})] * BULK

    def outbox_one() -> int:
        for _ in range(calls):
            with transaction.atomic():
                add.enqueue(1, 2)
        flush_outbox()  # every row delivered: the courier's work is in the round
        return calls

    def outbox_inline() -> int:
        for _ in range(calls):
            with transaction.atomic():
                add_inline.enqueue(1, 2)
        return calls

    def outbox_bulk() -> int:
        for _ in range(calls // BULK):
            with transaction.atomic():
                enqueue_many(add, bulk)
        flush_outbox()
        return calls // BULK * BULK

    def stage_one() -> int:
        for _ in range(calls):
            with transaction.atomic():
                add.enqueue(1, 2)
                transaction.get_connection().run_on_commit.clear()  # no delivery: its cost
        return calls

    def plain_one() -> int:
        for _ in range(calls):
            add.enqueue(1, 2)
        return calls

    def insert_one() -> int:
        with _cursor() as cursor:
            for _ in range(calls):
                with transaction.atomic():
                    cursor.execute("INSERT INTO bench_row (a, b) VALUES (1, 2)")
        return calls

    found: dict[str, Callable[[], int]] = {
        "outbox per call": outbox_one,
        "outbox per call, inline": outbox_inline,
        "outbox, stage only": stage_one,
        "outbox bulk (100/tx)": outbox_bulk,
        "plain enqueue": plain_one,
        "plain INSERT in tx": insert_one,
    }
    if tasks_db:
        from django_tasks import task as peer_task

        peer = globals()["db_add"] = peer_task(backend="db")(db_add)

        def peer_one() -> int:
            for _ in range(calls):
                with transaction.atomic():
                    peer.enqueue(1, 2)
            return calls

        def peer_bulk() -> int:
            for _ in range(calls // BULK):
                with transaction.atomic():
                    for _ in range(BULK):
                        peer.enqueue(1, 2)
            return calls // BULK * BULK

        found["tasks-db per call"] = peer_one
        found["tasks-db bulk (100/tx)"] = peer_bulk

    counter = iter(range(10**12))

    def bump(database: str) -> None:
        with _cursor() as cursor:
            cursor.execute("UPDATE bench_counter SET n = n + 1 WHERE id = 1")

    def body_plain() -> int:
        for _ in range(calls):
            with transaction.atomic():
                bump("default")
        return calls

    from django_ledger.tasks import effects

    def body_fenced() -> int:
        for _ in range(calls):
            result = SimpleNamespace(id=f"fx-{next(counter)}", backend="default")
            context = SimpleNamespace(task_result=result, fence=1)
            with effects(context, using="default") as fx:
                if not fx.done:
                    bump(fx.database)
                    fx.save({"bumped": 1})  # a result, as most tasks return
        return calls

    found["task body: UPDATE"] = body_plain
    found["task body: UPDATE in effects()"] = body_fenced
    return found


def clear_outbox() -> None:
    with _cursor() as cursor:
        cursor.execute("DELETE FROM django_ledger_outbox")


def stage_rows(rows: int) -> None:
    """Commit ``rows`` outbox rows whose on-commit delivery is dropped: the relay's work."""
    from django.db import transaction

    from django_ledger.tasks import enqueue_many

    add = globals()["bench_add"]
    for _ in range(rows // BULK):
        with transaction.atomic():
            enqueue_many(add, [((1, 2), {})] * BULK)
            # As if the process died after the commit: no delivery by the committer.
            transaction.get_connection().run_on_commit.clear()


def relay_round(rows: int, batch: int) -> float:
    from django_ledger.models import OutboxEntry
    from django_ledger.services.relay import Relay

    stage_rows(rows)
    assert OutboxEntry.objects.count() == rows
    relay = Relay(["default"], batch=batch)
    start = time.perf_counter()
    delivered = relay.run_once()
    elapsed = time.perf_counter() - start
    assert delivered == rows and not OutboxEntry.objects.exists(), delivered
    return delivered / elapsed


class MySQLDatabase:
    """A database of its own on a MySQL or MariaDB server run by hand: ``USER@HOST:PORT``.

    Never in the test suite. The driver is mysqlclient, else PyMySQL standing in for it.
    """

    def __init__(self, spec: str) -> None:
        user, _, address = spec.rpartition("@")
        host, _, port = address.partition(":")
        self.user, self.host, self.port = user or "root", host, int(port or 3306)
        self.name = f"ledger_bench_{os.getpid()}"
        try:
            import MySQLdb  # noqa: F401
        except ImportError:
            import pymysql

            pymysql.version_info = (2, 2, 1, "final", 0)  # Django asks mysqlclient 2.2.1+
            pymysql.install_as_MySQLdb()

    def _execute(self, sql: str) -> None:
        import MySQLdb

        link = MySQLdb.connect(host=self.host, port=self.port, user=self.user)
        try:
            link.cursor().execute(sql)
        finally:
            link.close()

    def start(self) -> None:
        self._execute(f"CREATE DATABASE {self.name} CHARACTER SET utf8mb4")

    def database(self) -> dict[str, Any]:
        return {
            "ENGINE": "django.db.backends.mysql",
            "NAME": self.name,
            "USER": self.user,
            "HOST": self.host,
            "PORT": str(self.port),
        }

    def stop(self) -> None:
        self._execute(f"DROP DATABASE IF EXISTS {self.name}")

    def pids(self) -> list[int]:
        return []  # a server of the machine's: not ours to pin


def postmaster_pids(postgres: PostgresServer) -> list[int]:
    """The postmaster and the processes it has started so far (their children inherit)."""
    main = int((postgres.data / "postmaster.pid").read_text().split()[0])
    found = [main]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == main:
                found.append(int(entry.name))
    return found


def run(
    rounds: int, calls: int, relay_rows: int, mysql: str | None = None, pin: bool = True
) -> tuple[dict[str, list[float]], bool]:
    server: Any
    if mysql is not None:
        server = MySQLDatabase(mysql)
    else:
        bindir = find_bindir()
        if bindir is None:
            raise SystemExit("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb)")
        server = PostgresServer(bindir)
    tasks_db = has_tasks_db()
    if not tasks_db:
        print("django-tasks-db is not installed: compared against plain enqueue and INSERT")
    redis_server = RedisServer()
    server.start()
    redis_server.start()
    try:
        if pin and hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2:
            # Both servers on CPU 0 (PostgreSQL's backends inherit the postmaster's
            # affinity: pinned before the first connection), the bench on CPU 1. Redis
            # pinned alone would be slowed by a busy CPU 0 that the database escapes.
            os.sched_setaffinity(redis_server.pid or 0, {0})
            pids = server.pids() if mysql is not None else postmaster_pids(server)
            for pid in pids:
                os.sched_setaffinity(pid, {0})
            os.sched_setaffinity(0, {1})
            print("pinned: redis-server and the database on CPU 0, the bench on CPU 1")
        configure_django(redis_server.url, server.database(), tasks_db)
        rounds_of = systems(calls, tasks_db)
        client = redis_server.client()
        for work in rounds_of.values():  # warm up: connections, scripts, imports
            work()
            clear_outbox()
        rates: dict[str, list[float]] = {name: [] for name in rounds_of}
        for batch in RELAY_BATCHES:
            rates[f"relay, batch {batch} (rows/s)"] = []
        for number in range(rounds):
            client.flushall()
            with _cursor() as cursor:
                cursor.execute("TRUNCATE bench_row")
                cursor.execute("TRUNCATE django_ledger_task_effect")
                if tasks_db:
                    from django_tasks_db.models import DBTaskResult

                    cursor.execute(f"TRUNCATE {DBTaskResult._meta.db_table}")
            for name, work in rounds_of.items():
                start, cpu = time.perf_counter(), time.process_time()
                done = work()
                rates[name].append(done / (time.perf_counter() - start))
                CPU.setdefault(name, []).append((time.process_time() - cpu) / done * 1e6)
                clear_outbox()  # what "stage only" left (untimed)
            for batch in RELAY_BATCHES:
                client.flushall()
                rates[f"relay, batch {batch} (rows/s)"].append(relay_round(relay_rows, batch))
            print(f"round {number + 1}/{rounds} done", file=sys.stderr)
        client.close()
    finally:
        from django.db import connections

        connections.close_all()
        redis_server.stop()
        redis_server.cleanup()
        server.stop()
    return rates, tasks_db


def ratio(rates: dict[str, list[float]], name: str, base: str) -> float:
    return median(a / b for a, b in zip(rates[name], rates[base], strict=True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=1000, help="calls per system per round")
    parser.add_argument("--relay-rows", type=int, default=20_000, help="rows per relay round")
    parser.add_argument(
        "--mysql",
        metavar="USER@HOST:PORT",
        help="by hand: a MySQL/MariaDB server instead of a private PostgreSQL cluster",
    )
    parser.add_argument(
        "--no-pin", action="store_true", help="pin nothing (the default pins the servers)"
    )
    args = parser.parse_args()
    rates, tasks_db = run(args.rounds, args.calls, args.relay_rows, args.mysql, not args.no_pin)
    base = "tasks-db per call" if tasks_db else "plain INSERT in tx"
    print(f"\n{args.rounds} rounds, {args.calls} calls each; ratios to {base!r}, same rounds")
    print(f"{'':34} {'per s':>10} {'us each':>9} {'ratio':>7} {'client CPU us':>14}")
    for name, values in rates.items():
        rate = median(values)
        shown = f"{ratio(rates, name, base):7.2f}" if not name.startswith("relay") else "      -"
        cpu = f"{median(CPU[name]):14.0f}" if name in CPU else ""
        print(f"{name:34} {rate:10,.0f} {1e6 / rate:9.1f} {shown}{cpu}")
    if tasks_db:
        print(
            "outbox bulk / tasks-db bulk: "
            f"{ratio(rates, 'outbox bulk (100/tx)', 'tasks-db bulk (100/tx)'):.2f}"
        )
    print(
        f"outbox per call / plain enqueue: {ratio(rates, 'outbox per call', 'plain enqueue'):.2f}"
    )
    parts = {
        "the transaction (BEGIN, INSERT, COMMIT)": median(
            1e6 / s for s in rates["outbox, stage only"]
        ),
        "inline, the delivery (admit_many, DELETE)": median(
            1e6 / o - 1e6 / s
            for o, s in zip(
                rates["outbox per call, inline"], rates["outbox, stage only"], strict=True
            )
        ),
        "background, the courier's part in the caller's time": median(
            1e6 / o - 1e6 / s
            for o, s in zip(rates["outbox per call"], rates["outbox, stage only"], strict=True)
        ),
        "of which a bare INSERT transaction": median(1e6 / i for i in rates["plain INSERT in tx"]),
    }
    for name, value in parts.items():
        print(f"outbox per call, {name}: {value:.0f} us")
    plain, fenced = "task body: UPDATE", "task body: UPDATE in effects()"
    cost = median(1e6 / f - 1e6 / p for p, f in zip(rates[plain], rates[fenced], strict=True))
    print(
        f"fenced effects cost per task: {cost:.0f} us ({ratio(rates, fenced, plain):.2f}x the rate)"
    )


if __name__ == "__main__":
    main()
