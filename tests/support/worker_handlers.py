"""Raw handlers the worker tests run (``LEDGER['QUEUES'][name]['HANDLER']``).

Each records what it did in Redis, so the test process (not the worker) can see it: a
hash ``{ns}:runs`` of request id -> runs, a list ``{ns}:started`` of "id fence attempt
worker" lines, and a flag ``{ns}:release`` that blocking handlers wait for.
"""

from __future__ import annotations

import json
import time

from django_ledger.conf import connection, ledger_settings
from django_ledger.core.worker import Job


def _key(name: str) -> str:
    return f"{ledger_settings.namespace}:{name}"


def _note(job: Job) -> None:
    client = connection()
    claim = job.claim
    pipe = client.pipeline(transaction=False)
    pipe.hincrby(_key("runs"), claim.request_id, 1)
    pipe.rpush(_key("started"), f"{claim.request_id} {claim.fence} {claim.attempt} {job.worker_id}")
    pipe.execute()


def record(job: Job) -> str:
    """Complete at once, storing the payload back as the result."""
    _note(job)
    return json.dumps({"echo": job.claim.payload})


def fail(job: Job) -> None:
    """Raise on every attempt."""
    _note(job)
    raise RuntimeError(f"attempt {job.claim.attempt} of {job.claim.request_id} failed")


def wait_for_release(job: Job) -> str:
    """Block (in short, interruptible steps) until the test sets the release flag."""
    _note(job)
    client = connection()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if client.exists(_key("release")):
            return "released"
        time.sleep(0.02)
    raise TimeoutError("never released")


def first_attempt_hangs(job: Job) -> str:
    """Hang on the first attempt (until interrupted); complete on any later one."""
    _note(job)
    if job.claim.attempt == 1:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.02)
    return "done"


def first_attempt_hangs_in_c(job: Job) -> str:
    """Hang inside one long C call on the first attempt: only a kill stops it."""
    _note(job)
    if job.claim.attempt == 1:
        time.sleep(60)
    return "done"


def outlives_its_lease(job: Job) -> str:
    """Take three seconds, longer than the queue's one-second lease."""
    _note(job)
    time.sleep(3)
    return "slow but done"


async def coroutine(job: Job) -> str:
    """A coroutine handler: runs on the worker's event loop."""
    import asyncio

    _note(job)
    await asyncio.sleep(0.01)
    return "async done"


def wait_for_file(job: Job) -> str:
    """Block until the file named by the payload exists: released without a round trip."""
    from pathlib import Path

    _note(job)
    path = Path(job.claim.payload)
    deadline = time.monotonic() + 60
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.005)
    return "found"


#: What ``hoard`` keeps: this worker process's memory grows with every task it runs.
_HOARD: list[bytes] = []


def hoard(job: Job) -> str:
    """Complete, keeping 32 MiB more resident each time (a leak, for recycling)."""
    _note(job)
    _HOARD.append(b"x" * (32 * 1024 * 1024))
    return "kept"
