"""Processes of their own for the outbox tests: Django set up on a database of the test's.

``run(step, ...)`` starts ``python -m tests.support.outbox_process STEP ...`` with
``tests.support.tasks_app.settings`` on the suite's Redis, in the test's namespace, with
``DATABASE_PATH`` (a SQLite file) or ``DATABASE_URL``-like ``LEDGER_TEST_PG`` (a
PostgreSQL DSN, as the ``default`` database). Each step prints one JSON line.

Steps:

- ``unmigrated``: on a database with no outbox table, enqueue inside ``atomic()``
  (admitted at once), ``get_result`` of an unknown id and of that task, and the deploy
  check's W066.
- ``killed ID_FILE``: enqueue inside ``atomic()``, write the task id to ``ID_FILE`` and
  commit; an on-commit callback registered first SIGKILLs the process, so the committer's
  own delivery never runs.
- ``exits COUNT``: COUNT transactions of one enqueue each, then a normal exit at once:
  with ``OUTBOX_DELIVERY`` ``background`` (PostgreSQL's default) the courier may still
  hold them, and the exit waits for it.
- ``relay``: ``manage.py ledger_relay --once``.
- ``worker ARGS...``: ``manage.py ledger_worker --concurrency 1 ARGS...`` (until SIGTERM,
  or ``--burst``); ``start`` runs a step without waiting for it.
- ``migrate``: ``manage.py migrate`` (quietly).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _env(redis_url: str, namespace: str, database: dict[str, str]) -> dict[str, str]:
    return {
        **os.environ,
        "REDIS_URL": redis_url,
        "LEDGER_NAMESPACE": namespace,
        "DJANGO_SETTINGS_MODULE": "tests.support.outbox_process_settings",
        "PYTHONPATH": str(ROOT),
        **database,
    }


def run(
    step: str, *args: str, redis_url: str, namespace: str, database: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    """Run ``step`` in a process of its own; ``database``: ``DATABASE_PATH`` or ``LEDGER_TEST_PG``."""
    env = _env(redis_url, namespace, database)
    return subprocess.run(
        [sys.executable, "-m", "tests.support.outbox_process", step, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def start(
    step: str, *args: str, redis_url: str, namespace: str, database: dict[str, str]
) -> subprocess.Popen[str]:
    """Start ``step`` in a process of its own, as ``run`` does, without waiting for it."""
    env = _env(redis_url, namespace, database)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.outbox_process", step, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def answer(process: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The step's JSON line; fail with its output unless it exited 0."""
    assert process.returncode == 0, (
        f"exit {process.returncode}:\n{process.stdout}\n{process.stderr}"
    )
    found: dict[str, Any] = json.loads(process.stdout.strip().splitlines()[-1])
    return found


def _unmigrated() -> dict[str, Any]:
    from django.db import transaction

    from django_ledger.checks.tasks import check_outbox
    from django_ledger.queues import queues
    from django_ledger.tasks.compat import TaskResultDoesNotExist
    from tests.support.tasks_app import tasks

    with transaction.atomic():
        first = tasks.add.enqueue(1, 2)
        pending_inside = queues.get("default").ledger.stats().pending
        tasks.add.enqueue(2, 3)
    try:
        tasks.add.get_result("not-a-task")
        unknown = "found"
    except TaskResultDoesNotExist:
        unknown = "TaskResultDoesNotExist"
    return {
        "pending_inside": pending_inside,
        "status": str(tasks.add.get_result(first.id).status),
        "unknown": unknown,
        "checks": [message.id for message in check_outbox(databases=["default"])],
    }


def _killed(id_file: str) -> dict[str, Any]:
    from django.db import transaction

    from tests.support.tasks_app import tasks

    with transaction.atomic():
        # Registered first, so it runs first: the committer dies after the commit and
        # before its own delivery (the next callback).
        transaction.on_commit(lambda: os.kill(os.getpid(), signal.SIGKILL))
        result = tasks.add.enqueue(20, 22)
        Path(id_file).write_text(result.id)
    return {"survived": True}  # never reached


def _exits(count: str) -> dict[str, Any]:
    from django.db import transaction

    from django_ledger.outbox import courier
    from tests.support.tasks_app import tasks

    ids = []
    for n in range(int(count)):
        with transaction.atomic():
            ids.append(tasks.add.enqueue(n, n).id)
    # nothing waits here: the process's exit does (courier.EXIT_FLUSH)
    return {"ids": ids, "courier": courier._courier._thread is not None}


def _command(name: str, *args: str) -> dict[str, Any]:
    from django.core.management import call_command

    out = StringIO()
    call_command(name, *args, stdout=out)
    return {"stdout": out.getvalue()}


def main(argv: list[str]) -> None:
    import django

    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(name)s: %(message)s")
    django.setup()
    step, *args = argv
    if step == "unmigrated":
        found = _unmigrated()
    elif step == "killed":
        found = _killed(*args)
    elif step == "exits":
        found = _exits(*args)
    elif step == "relay":
        found = _command("ledger_relay", "--once")
    elif step == "worker":
        found = _command("ledger_worker", "--concurrency", "1", *args)
    elif step == "migrate":
        found = _command("migrate", "--verbosity", "0")
    else:
        raise SystemExit(f"unknown step {step!r}")
    print(json.dumps(found), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
