"""Transactions under chaos: a task exists iff its transaction committed, its write applies once.

Run from the repository root (docs/transactions.md shows a run):

    /work/venv311/bin/python -m benchmarks.transactions_chaos --duration 60

It starts a private PostgreSQL cluster (``tests/support/postgres_server.py``) and a private
redis-server with an AOF (``appendfsync always``), then processes of its own:

* producers: each transaction inserts a row of ``chaos_order`` and enqueues
  ``benchmarks.chaos_tasks.bump(order_id)`` (the outbox), and 20% raise on purpose and
  roll back (their ids are logged to a file after the rollback);
* ``ledger_worker`` processes (lease 3 s; each runs repair, and the relay beside it) running
  ``bump``: it logs each run in ``chaos_run``, then increments ``chaos_counter`` inside
  ``effects(context)``;
* a ``manage.py ledger_relay --loop``.

For ``--duration`` seconds, every 0.5 to 2 s, one fault at random: SIGKILL a producer,
a worker or the relay (restarted), SIGSTOP a worker past its lease (then SIGCONT), or
SIGKILL Redis and restart it from its AOF. Then the producers stop, the relay drains, the
workers finish what is due, and it prints the counts. Exit 0 for PASS: every committed
row's task ran, no rolled-back row's task ran, no counter above 1 (no double write).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROLLBACK_SHARE = 0.2
LEASE = 3


class Rollback(Exception):
    """Raised on purpose inside a producer's transaction."""


def configure() -> None:
    """Django on ``$CHAOS_PG`` (a ``DATABASES`` entry) and ``$CHAOS_REDIS``."""
    import django
    from django.conf import settings

    apps = ["django.contrib.contenttypes", "django.contrib.auth", "django_ledger"]
    if django.VERSION < (6, 0):
        apps.append("django_tasks")
    settings.configure(
        INSTALLED_APPS=apps,
        DATABASES={"default": json.loads(os.environ["CHAOS_PG"])},
        USE_TZ=True,
        LEDGER={
            "CONNECTION": os.environ["CHAOS_REDIS"],
            "NAMESPACE": "txchaos",
            "QUEUES": {"default": {"LEASE": LEASE, "MAX_RECORDS": 10_000_000}},
        },
        TASKS={"default": {"BACKEND": "django_ledger.tasks.LedgerBackend"}},
        LOGGING={
            "version": 1,
            "disable_existing_loggers": False,
            "root": {"level": "ERROR", "handlers": ["stderr"]},
            "handlers": {"stderr": {"class": "logging.StreamHandler"}},
        },
    )
    django.setup()


def produce(log_path: str) -> None:
    from django.db import connection, transaction

    from benchmarks.chaos_tasks import bump

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(log_path, "a") as log:
        while True:
            order_id = uuid.uuid4().hex
            try:
                with transaction.atomic():
                    with connection.cursor() as cursor:
                        cursor.execute("INSERT INTO chaos_order (id) VALUES (%s)", [order_id])
                    bump.enqueue(order_id)
                    if random.random() < ROLLBACK_SHARE:
                        raise Rollback
            except Rollback:
                log.write(order_id + "\n")
                log.flush()
            time.sleep(0.002)  # a steady rate, not a flood of a loaded machine


def command(name: str, *args: str) -> None:
    from django.core.management import call_command

    import benchmarks.chaos_tasks  # noqa: F401  (the worker finds bump here)

    call_command(name, *args)


def child(role: str, *args: str) -> None:
    configure()
    if role == "producer":
        produce(*args)
    elif role == "worker":
        command("ledger_worker", "--concurrency", "4", "--shutdown-timeout", "5")
    elif role == "relay":
        command("ledger_relay", "--loop", "--batch", "200")
    else:
        raise SystemExit(f"unknown role {role!r}")


class Fleet:
    """The child processes of one role: started, killed and restarted by index."""

    def __init__(self, role: str, count: int, env: dict[str, str], workdir: Path) -> None:
        self.role, self.env, self.workdir = role, env, workdir
        self.procs: list[subprocess.Popen[bytes]] = []
        self.starts = 0
        for index in range(count):
            self.procs.append(self._spawn(index))

    def _spawn(self, index: int) -> subprocess.Popen[bytes]:
        self.starts += 1
        args = [sys.executable, "-m", "benchmarks.transactions_chaos", "--child", self.role]
        if self.role == "producer":
            args.append(str(self.workdir / f"rolled-back-{index}.txt"))
        err = open(self.workdir / f"{self.role}-{index}.log", "ab")  # noqa: SIM115
        return subprocess.Popen(args, cwd=ROOT, env=self.env, stdout=err, stderr=err)

    def kill(self, index: int) -> None:
        proc = self.procs[index]
        proc.send_signal(signal.SIGCONT)
        proc.kill()
        proc.wait()
        self.procs[index] = self._spawn(index)

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def setup_tables() -> None:
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE chaos_order (id text PRIMARY KEY)")
        cursor.execute("CREATE TABLE chaos_counter (order_id text PRIMARY KEY, n int)")
        cursor.execute(
            "CREATE TABLE chaos_run (id bigserial PRIMARY KEY, order_id text, fence bigint)"
        )


def drained() -> bool:
    from django.db import connection

    from django_ledger.queues import queues

    stats = queues.get("default").ledger.stats()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_ledger_outbox")
        (outbox,) = cursor.fetchone()
    return outbox == 0 and stats.pending_due + stats.pending_later + stats.claimed == 0


def counts(workdir: Path) -> dict[str, int]:
    from django.db import connection

    rolled = set()
    for path in workdir.glob("rolled-back-*.txt"):
        rolled.update(line.strip() for line in path.read_text().splitlines() if line.strip())
    with connection.cursor() as cursor:
        cursor.execute("CREATE TEMP TABLE rolled (id text PRIMARY KEY)")
        if rolled:
            cursor.executemany("INSERT INTO rolled VALUES (%s)", [[i] for i in rolled])

        def one(sql: str) -> int:
            cursor.execute(sql)
            return int(cursor.fetchone()[0])

        return {
            "committed rows": one("SELECT count(*) FROM chaos_order"),
            "committed rows whose task ran (write applied)": one(
                "SELECT count(*) FROM chaos_order o JOIN chaos_counter c ON c.order_id = o.id"
            ),
            "committed rows whose task never ran": one(
                "SELECT count(*) FROM chaos_order o LEFT JOIN chaos_counter c "
                "ON c.order_id = o.id WHERE c.order_id IS NULL"
            ),
            "rolled-back rows (logged)": len(rolled),
            "rolled-back rows in chaos_order": one(
                "SELECT count(*) FROM chaos_order o JOIN rolled r ON r.id = o.id"
            ),
            "rolled-back rows' tasks run": one(
                "SELECT count(DISTINCT order_id) FROM chaos_run WHERE order_id NOT IN "
                "(SELECT id FROM chaos_order)"
            ),
            "body runs (entries to the task)": one("SELECT count(*) FROM chaos_run"),
            "tasks run more than once": one(
                "SELECT count(*) FROM (SELECT order_id FROM chaos_run GROUP BY order_id "
                "HAVING count(*) > 1) t"
            ),
            "double writes (counter above 1)": one(
                "SELECT count(*) FROM chaos_counter WHERE n > 1"
            ),
        }


def parent(duration: float, producers: int, workers: int, seed: int) -> int:
    from tests.support.postgres_server import PostgresServer, find_bindir
    from tests.support.redis_server import RedisServer

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb)")
    rng = random.Random(seed)
    workdir = Path(tempfile.mkdtemp(prefix="txchaos-"))
    print(f"logs in {workdir}; seed {seed}")
    postgres = PostgresServer(bindir)
    redis_server = RedisServer(appendonly=True, appendfsync="always")
    postgres.start()
    redis_server.start()
    env = {
        **os.environ,
        "CHAOS_PG": json.dumps(postgres.database()),
        "CHAOS_REDIS": redis_server.url,
        "PYTHONPATH": str(ROOT),
    }
    os.environ.update(CHAOS_PG=env["CHAOS_PG"], CHAOS_REDIS=env["CHAOS_REDIS"])
    faults = dict.fromkeys(("producer", "worker", "relay", "pause", "redis"), 0)
    fleets: list[Fleet] = []
    try:
        configure()
        setup_tables()
        prods = Fleet("producer", producers, env, workdir)
        works = Fleet("worker", workers, env, workdir)
        relays = Fleet("relay", 1, env, workdir)
        fleets = [prods, works, relays]
        end = time.monotonic() + duration
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.5, 2.0))
            fault = rng.choice(list(faults))
            faults[fault] += 1
            if fault == "producer":
                prods.kill(rng.randrange(producers))
            elif fault == "worker":
                works.kill(rng.randrange(workers))
            elif fault == "relay":
                relays.kill(0)
            elif fault == "pause":
                proc = works.procs[rng.randrange(workers)]
                proc.send_signal(signal.SIGSTOP)
                time.sleep(LEASE + 1)
                proc.send_signal(signal.SIGCONT)
            else:
                redis_server.kill()
                time.sleep(rng.uniform(0.2, 1.0))
                redis_server.restart()
        prods.stop()
        fleets = [works, relays]
        deadline = time.monotonic() + 180
        while not drained():
            if time.monotonic() > deadline:
                print("not drained after 180 s")
                break
            time.sleep(0.5)
        for fleet in fleets:
            fleet.stop()
        fleets = []
        found = counts(workdir)
    finally:
        for fleet in fleets:
            for proc in fleet.procs:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
        from django.db import connections

        connections.close_all()
        redis_server.stop()
        redis_server.cleanup()
        postgres.stop()
    print(f"{duration:.0f} s of faults, {producers} producers, {workers} workers, 1 relay")
    print("faults: " + ", ".join(f"{name} {count}" for name, count in faults.items()))
    for name, value in found.items():
        print(f"{name:48} {value:8,}")
    ok = (
        found["committed rows whose task never ran"] == 0
        and found["rolled-back rows in chaos_order"] == 0
        and found["rolled-back rows' tasks run"] == 0
        and found["double writes (counter above 1)"] == 0
    )
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        child(*argv[1:])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults (60)")
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    return parent(args.duration, args.producers, args.workers, seed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
