"""Tasks and raw handlers that end with a ``BaseException`` other than ``Exception``.

Each must end its own attempt (FAILED, its error recorded) and leave its thread, the
worker's event loop and the worker itself serving (``tests/worker/test_worker_escapes.py``).
"""

from __future__ import annotations

import asyncio
import sys
import time

from django_ledger.core.worker import Job
from django_ledger.tasks import task as ledger_task


class Escape(BaseException):
    """A project's own ``BaseException``: neither an ``Exception`` nor the worker's."""


@ledger_task(max_attempts=2, backoff_base=0.001, backoff_cap=0.002)
def interrupts() -> None:
    raise KeyboardInterrupt("raised by the task, not a signal")


@ledger_task(max_attempts=2, backoff_base=0.001, backoff_cap=0.002)
def generator_exits() -> None:
    raise GeneratorExit("raised by the task")


@ledger_task(max_attempts=2, backoff_base=0.001, backoff_cap=0.002)
def escapes() -> None:
    raise Escape("a BaseException of the project's own")


@ledger_task(max_attempts=2, backoff_base=0.001, backoff_cap=0.002)
async def async_interrupts() -> None:
    await asyncio.sleep(0)
    raise KeyboardInterrupt("raised by the coroutine, not a signal")


@ledger_task(max_attempts=2, backoff_base=0.001, backoff_cap=0.002)
async def async_cancels() -> None:
    await asyncio.sleep(0)
    raise asyncio.CancelledError("raised by the coroutine, not the worker")


@ledger_task(max_attempts=2, backoff_base=0.001, backoff_cap=0.002)
async def async_escapes() -> None:
    await asyncio.sleep(0)
    raise Escape("a BaseException of the project's own, from a coroutine")


@ledger_task(max_attempts=2, backoff_base=0.001, backoff_cap=0.002)
async def async_exits() -> None:
    await asyncio.sleep(0)
    sys.exit(5)


@ledger_task(timeout=0.3, max_attempts=1)
def spins() -> None:
    """Loop in Python until the worker's own time-out interrupts the thread."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.01)


def _raise(what: str) -> None:
    if what == "exit":
        sys.exit(4)
    if what == "interrupt":
        raise KeyboardInterrupt("raised by the raw handler")
    raise Escape(f"raised by the raw handler: {what}")


def raw_escape(job: Job) -> None:
    """A raw ``HANDLER``: its payload names what it raises (``exit``, ``interrupt``...)."""
    _raise(job.claim.payload)


async def async_raw_escape(job: Job) -> None:
    """A coroutine raw ``HANDLER``, as ``raw_escape``, or ``cancel``."""
    await asyncio.sleep(0)
    if job.claim.payload == "cancel":
        raise asyncio.CancelledError("raised by the handler")
    _raise(job.claim.payload)
