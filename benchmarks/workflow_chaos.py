"""Workflows under chaos: 200 chords of 50 steps; every callback once, with all its results.

Run from the repository root (it prints how it ran, then the counts):

    /work/venv311/bin/python -m benchmarks.workflow_chaos              # 200 chords of 50
    /work/venv311/bin/python -m benchmarks.workflow_chaos --quick      # 40 chords of 20

It starts a private redis-server with an AOF (``appendonly yes``, ``appendfsync
always``; never port 6379) and an SQLite database (the callbacks' fenced effects), then
processes of its own:

* a producer that enqueues the chords (``chord([sig(part, c, i) ...], sig(gather, c))
  .enqueue(id=c)``), paced over the run, retrying an id after an error; restarted after
  a SIGKILL, it enqueues every id it had already seen answered again (each must answer
  "already there", building nothing) before it goes on;
* ``ledger_worker`` processes (lease 3 s, concurrency 4, repair on) running
  ``benchmarks.workflow_chaos_tasks``: ``part`` logs its run and returns its index;
  ``gather``, the callback, logs what it was given and writes one row per chord inside
  ``effects(context)``.

For ``--duration`` seconds, every 0.5 to 2 s, one fault at random: SIGKILL a worker
(restarted), SIGSTOP a worker past its lease (then SIGCONT), SIGKILL Redis and restart
it from its AOF, ``FUNCTION FLUSH``, or SIGKILL the producer (restarted). Then the faults
stop, the producer finishes, the workers drain what is due, and it prints the counts
from the ledger (``get_workflow`` of each chord), the run logs and the database. Exit 0
for PASS: every chord admitted once and found; every step COMPLETED (none waiting, due,
running, failed or cancelled: none lost or stuck); every callback COMPLETED with all its
results in order, its effect written exactly once; no callback ever run with fewer
results.
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
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import transactions_chaos as chaos  # noqa: E402

LEASE = 3
FAULTS = ("worker", "pause", "redis", "function-flush", "producer")


def configure() -> None:
    """Django on ``$CHAOS_DB`` (an SQLite file) and ``$CHAOS_REDIS``."""
    import django
    from django.conf import settings

    apps = ["django.contrib.contenttypes", "django.contrib.auth", "django_ledger"]
    if django.VERSION < (6, 0):
        apps.append("django_tasks")
    settings.configure(
        INSTALLED_APPS=apps,
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": os.environ["CHAOS_DB"],
                "OPTIONS": {"timeout": 60},
            }
        },
        USE_TZ=True,
        LEDGER={
            "CONNECTION": os.environ["CHAOS_REDIS"],
            "NAMESPACE": "wfchaos",
            "QUEUES": {
                "default": {
                    "LEASE": LEASE,
                    "MAX_ATTEMPTS": 50,
                    "MAX_RECORDS": 10_000_000,
                }
            },
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


def chord_ids(chords: int) -> list[str]:
    return [f"wfchaos-{k:04d}" for k in range(chords)]


def produce(answers_path: str, chords: int, steps: int, pace: float) -> None:
    """Enqueue every chord once; after a restart, repeat the answered ones first."""
    from benchmarks.workflow_chaos_tasks import gather, part
    from django_ledger.tasks.workflows import chord, sig

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    answered: list[str] = []
    if os.path.exists(answers_path):
        answered = [line.split()[0] for line in Path(answers_path).read_text().splitlines()]
    seen = set(answered)
    with open(answers_path, "a") as log:
        for cid in chord_ids(chords):
            repeat = cid in seen
            while True:
                try:
                    handle = chord(
                        [sig(part, cid, i) for i in range(steps)], sig(gather, cid)
                    ).enqueue(id=cid)
                    break
                except Exception:  # Redis down, restarting, or a lost answer: same id again
                    time.sleep(0.2)
            log.write(f"{cid} {'created' if handle.created else 'duplicate'} {int(repeat)}\n")
            log.flush()
            if not repeat:
                time.sleep(pace)
    Path(answers_path + ".done").touch()


def child(role: str, *args: str) -> None:
    configure()
    if role == "producer":
        produce(args[0], int(args[1]), int(args[2]), float(args[3]))
    elif role == "worker":
        from django.core.management import call_command

        import benchmarks.workflow_chaos_tasks  # noqa: F401  (the worker finds the tasks here)

        call_command("ledger_worker", "--concurrency", "4", "--shutdown-timeout", "5")
    else:
        raise SystemExit(f"unknown role {role!r}")


class Fleet(chaos.Fleet):
    """The child processes of one role (``transactions_chaos.Fleet``), with this script's
    children and their arguments, and a restart of those that exited on their own."""

    def __init__(
        self, role: str, count: int, env: dict[str, str], workdir: Path, args: list[str]
    ) -> None:
        self.args = args
        super().__init__(role, count, env, workdir)

    def _spawn(self, index: int) -> subprocess.Popen[bytes]:
        args = [sys.executable, "-m", "benchmarks.workflow_chaos", "--child", self.role]
        err = open(self.workdir / f"{self.role}-{index}.log", "ab")  # noqa: SIM115
        return subprocess.Popen([*args, *self.args], cwd=ROOT, env=self.env, stdout=err, stderr=err)

    def revive(self) -> int:
        """Restart the processes that exited on their own; return how many."""
        revived = 0
        for index, proc in enumerate(self.procs):
            if proc.poll() is not None:
                self.procs[index] = self._spawn(index)
                revived += 1
        return revived


def setup_tables() -> None:
    from django.core.management import call_command
    from django.db import connection

    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE chaos_callback (chord text, n int, in_order int)")


def idle() -> bool:
    """Nothing due, scheduled or running in the queue (waiting steps are not records)."""
    from django_ledger.queues import queues

    stats = queues.get("default").ledger.stats()
    return stats.pending_due + stats.pending_later + stats.claimed == 0


def counts(workdir: Path, chords: int, steps: int) -> dict[str, Any]:
    from django.db import connection

    from django_ledger.tasks.workflows import WorkflowDoesNotExist, get_workflow

    answers: Counter[str] = Counter()
    answered: set[str] = set()
    repeats_not_duplicate = 0
    for line in (workdir / "answers.txt").read_text().splitlines():
        cid, answer, repeat = line.split()
        answers[answer] += 1
        answered.add(cid)
        if repeat == "1" and answer != "duplicate":
            repeats_not_duplicate += 1
    created_ids = Counter(
        line.split()[0]
        for line in (workdir / "answers.txt").read_text().splitlines()
        if line.split()[1] == "created"
    )
    states: Counter[str] = Counter()
    callback_states: Counter[str] = Counter()
    found = 0
    callbacks_right = 0
    for cid in chord_ids(chords):
        try:
            state = get_workflow(cid, queue="default")
        except WorkflowDoesNotExist:
            continue
        found += 1
        for step in state.steps[:-1]:
            states[step.state] += 1
        callback = state.steps[-1]
        callback_states[callback.state] += 1
        if callback.state == "COMPLETED" and callback.return_value == [steps, 1]:
            callbacks_right += 1
    step_runs: Counter[tuple[str, str]] = Counter()
    callback_runs: Counter[str] = Counter()
    short_callbacks = 0
    for path in workdir.glob("runs-*.log"):
        for line in path.read_text().splitlines():
            fields = line.split()
            if not fields:
                continue
            if fields[0] == "S" and len(fields) == 4:
                step_runs[(fields[1], fields[2])] += 1
            elif fields[0] == "C" and len(fields) == 5:
                callback_runs[fields[1]] += 1
                if fields[2] != str(steps) or fields[3] != "1":
                    short_callbacks += 1
    with connection.cursor() as cursor:
        cursor.execute("SELECT chord, n, in_order FROM chaos_callback")
        rows = cursor.fetchall()
    effects = Counter(row[0] for row in rows)
    return {
        "chords": chords,
        "steps per chord (+1 callback)": steps,
        "chords answered (created, or already there after a lost answer)": len(answered),
        "enqueue answers: created": answers["created"],
        "enqueue answers: duplicate": answers["duplicate"],
        "chords created more than once": sum(1 for n in created_ids.values() if n > 1),
        "repeats (after a producer restart) not answered duplicate": repeats_not_duplicate,
        "chords found by get_workflow": found,
        "header steps COMPLETED": states["COMPLETED"],
        "header steps in another state": sum(v for k, v in states.items() if k != "COMPLETED"),
        "header steps by state": dict(states),
        "callbacks COMPLETED with all results in order": callbacks_right,
        "callbacks by state": dict(callback_states),
        "step bodies run (distinct steps)": len(step_runs),
        "step body runs in all": sum(step_runs.values()),
        "steps run more than once (after a fault)": sum(1 for n in step_runs.values() if n > 1),
        "callback body runs in all": sum(callback_runs.values()),
        "callbacks run more than once (after a fault)": sum(
            1 for n in callback_runs.values() if n > 1
        ),
        "callback runs given fewer results or out of order": short_callbacks,
        "callback effects written (rows)": len(rows),
        "chords whose callback effect was written once": sum(1 for n in effects.values() if n == 1),
        "chords whose callback effect was written twice or more": sum(
            1 for n in effects.values() if n > 1
        ),
        "callback effects with fewer results or out of order": sum(
            1 for row in rows if row[1] != steps or row[2] != 1
        ),
    }


def passed(found: dict[str, Any]) -> bool:
    chords, steps = found["chords"], found["steps per chord (+1 callback)"]
    return bool(
        found["chords answered (created, or already there after a lost answer)"] == chords
        and found["chords created more than once"] == 0
        and found["repeats (after a producer restart) not answered duplicate"] == 0
        and found["chords found by get_workflow"] == chords
        and found["header steps COMPLETED"] == chords * steps
        and found["header steps in another state"] == 0
        and found["callbacks COMPLETED with all results in order"] == chords
        and found["step bodies run (distinct steps)"] == chords * steps
        and found["callback runs given fewer results or out of order"] == 0
        and found["chords whose callback effect was written once"] == chords
        and found["chords whose callback effect was written twice or more"] == 0
        and found["callback effects with fewer results or out of order"] == 0
    )


def parent(args: argparse.Namespace) -> int:
    from tests.support.redis_server import RedisServer

    rng = random.Random(args.seed)
    workdir = Path(tempfile.mkdtemp(prefix="wfchaos-"))
    print(
        f"logs in {workdir}; seed {args.seed}; {args.chords} chords of {args.steps} steps, "
        f"{args.workers} workers (concurrency 4, lease {LEASE} s), faults for "
        f"{args.duration:.0f} s; "
        f"load average {os.getloadavg()[0]:.2f} at start",
        flush=True,
    )
    redis_server = RedisServer(appendonly=True, appendfsync="always")
    redis_server.start()
    env = {
        **os.environ,
        "CHAOS_DB": str(workdir / "chaos.sqlite3"),
        "CHAOS_REDIS": redis_server.url,
        "CHAOS_DIR": str(workdir),
        "PYTHONPATH": str(ROOT),
    }
    os.environ.update({k: env[k] for k in ("CHAOS_DB", "CHAOS_REDIS", "CHAOS_DIR")})
    faults = dict.fromkeys(FAULTS, 0)
    fleets: list[Fleet] = []
    answers = workdir / "answers.txt"
    pace = args.duration * 0.8 / args.chords
    began = time.monotonic()
    try:
        configure()
        setup_tables()
        producer_args = [str(answers), str(args.chords), str(args.steps), f"{pace:.4f}"]
        works = Fleet("worker", args.workers, env, workdir, [])
        prods = Fleet("producer", 1, env, workdir, producer_args)
        fleets = [works, prods]
        end = time.monotonic() + args.duration
        exits = 0
        while time.monotonic() < end:
            time.sleep(rng.uniform(0.5, 2.0))
            exits += works.revive()
            fault = rng.choice(FAULTS)
            if fault == "producer" and Path(str(answers) + ".done").exists():
                fault = "worker"
            faults[fault] += 1
            if fault == "worker":
                works.kill(rng.randrange(args.workers))
            elif fault == "producer":
                prods.kill(0)
            elif fault == "pause":
                proc = works.procs[rng.randrange(args.workers)]
                proc.send_signal(signal.SIGSTOP)
                time.sleep(LEASE + 1)
                proc.send_signal(signal.SIGCONT)
            elif fault == "redis":
                redis_server.kill()
                time.sleep(rng.uniform(0.2, 1.0))
                redis_server.restart()
            else:
                try:
                    redis_server.client().function_flush()
                except Exception as exc:  # Redis restarting: count it all the same
                    print(f"FUNCTION FLUSH failed: {exc}")
        faulted = time.monotonic() - began
        deadline = time.monotonic() + 300
        while not Path(str(answers) + ".done").exists():
            if prods.procs[0].poll() is not None or time.monotonic() > deadline:
                print("the producer stopped before enqueuing every chord")
                break
            time.sleep(0.2)
        prods.stop()
        fleets = [works]
        exits += works.revive()
        settled = 0
        while settled < 3:  # idle on three looks in a row, a second apart
            if time.monotonic() > deadline:
                print("not drained after 300 s")
                break
            settled = settled + 1 if idle() else 0
            time.sleep(1.0)
        drained = time.monotonic() - began
        works.stop()
        fleets = []
        found = counts(workdir, args.chords, args.steps)
    finally:
        for fleet in fleets:
            for proc in fleet.procs:
                proc.send_signal(signal.SIGCONT)
                proc.kill()
        redis_server.stop()
        redis_server.cleanup()
    print(
        f"{faulted:.0f} s of faults, drained {drained:.0f} s after the start; "
        f"{args.workers} workers, 1 producer"
    )
    print(
        "faults: "
        + ", ".join(f"{name} {count}" for name, count in faults.items())
        + f"; workers that exited on their own (restarted): {exits}"
    )
    for name, value in found.items():
        shown = f"{value:,}" if isinstance(value, int) else json.dumps(value)
        print(f"{name:66} {shown:>10}")
    ok = passed(found)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        child(*argv[1:])
        return 0
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--chords", type=int, default=200)
    parser.add_argument("--steps", type=int, default=50, help="header steps per chord (50)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults (60)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--quick", action="store_true", help="40 chords of 20 steps, 20 s of faults"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.chords, args.steps, args.duration = 40, 20, 20.0
    if args.seed is None:
        args.seed = random.randrange(10**6)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
