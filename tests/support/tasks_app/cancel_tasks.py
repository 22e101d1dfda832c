"""Tasks that run until cancelled (``tests/worker/test_worker_cancel.py``).

Each notes in Redis, under keys named by its ``key`` argument, when it started (its
process id) and when it saw its cancel, by the Redis server's clock (``TIME``): the
same clock the cancel's time is taken on, so the test compares the two alone.
"""

from __future__ import annotations

import asyncio
import os
import threading

from django_ledger.conf import connection
from django_ledger.tasks import LedgerTaskContext
from django_ledger.tasks import task as ledger_task

#: The longest a task waits for its cancel: a test that fails does not hang.
PATIENCE = 30.0


def server_ms() -> int:
    seconds, micros = connection().time()
    return int(seconds) * 1000 + int(micros) // 1000


@ledger_task(takes_context=True)
def checks_for_cancel(context: LedgerTaskContext, key: str) -> str:
    """Check ``context.cancelled`` every 10 ms; note when it turns; then check (raises)."""
    client = connection()
    client.rpush(f"{key}:started", os.getpid())
    pause = threading.Event()
    for _ in range(int(PATIENCE * 100)):
        if context.cancelled:
            break
        pause.wait(0.01)
    client.set(f"{key}:saw", server_ms())
    context.check_cancelled()
    return "ran to the end"


@ledger_task
async def awaits_its_cancel(key: str) -> str:
    """Await a long sleep; note when the cancel ends it; never reach the line after."""
    client = connection()
    client.rpush(f"{key}:started", os.getpid())
    try:
        await asyncio.sleep(PATIENCE)
    except asyncio.CancelledError:
        client.set(f"{key}:saw", server_ms())
        raise
    client.set(f"{key}:after", server_ms())
    return "ran to the end"


@ledger_task
def never_checks(key: str) -> str:
    """Block, never looking at its cancel: only ending its process stops it."""
    client = connection()
    client.rpush(f"{key}:started", os.getpid())
    threading.Event().wait(PATIENCE)
    client.set(f"{key}:after", server_ms())
    return "ran to the end"
