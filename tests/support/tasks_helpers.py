"""What the task tests share: settings for a test's own namespace, and attempts in-process.

``run_claimed`` plays one worker step with the ledger and ``TaskHandler`` directly (claim,
plan, run, settle with the result), for tests that look at one attempt closely; the
tests that need a worker start real ``manage.py ledger_worker`` processes
(``tasks_fixtures.py``).
"""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.conf import settings
from django.test import override_settings

from django_ledger.core.ledger import Ledger
from django_ledger.core.records import State
from django_ledger.core.worker.handler import Job, Outcome
from django_ledger.queues import queues
from django_ledger.tasks.handler import TaskHandler

ROOT = Path(__file__).resolve().parents[2]
#: The queues of the test project's ``TASKS`` (``testproject/settings.py``).
TASK_QUEUES = ["default", "emails", "reports"]


def ledger_settings_for(namespace: str, **queues: dict[str, Any]) -> dict[str, Any]:
    """The test project's ``LEDGER`` in ``namespace``, with queue overrides."""
    ledger = copy.deepcopy(settings.LEDGER)
    ledger["NAMESPACE"] = namespace
    for name, overrides in queues.items():
        ledger["QUEUES"][name] = overrides
    return ledger


@contextmanager
def task_settings(namespace: str, **queues: dict[str, Any]) -> Iterator[None]:
    with override_settings(LEDGER=ledger_settings_for(namespace, **queues)):
        yield


def run_claimed(
    queue: str = "default", worker_id: str = "worker-1", handler: TaskHandler | None = None
) -> tuple[Job, Outcome, Any] | None:
    """Claim one task of ``queue``, run it as a worker does, settle it; ``None`` if none is due.

    Returns the job, the outcome and the settlement.
    """
    ledger = queues.get(queue).ledger  # the backend's own (a test may skew its clock)
    handler = handler or TaskHandler(queue)
    lease = 30.0
    claim = ledger.claim(worker_id, lease)
    if claim is None:
        return None
    previous = ledger.results([claim.request_id])[0] if claim.attempt > 1 else None
    job = Job(
        claim=claim,
        queue=queue,
        worker_id=worker_id,
        started_at=claim.lease_until - int(lease * 1000),
        previous_result=previous,
    )
    plan = handler.plan(job)
    outcome = handler.run(job, plan)
    if not isinstance(outcome, Outcome):
        outcome = asyncio.run(_awaited(outcome))
    settlement = ledger.settle(claim, outcome.state, outcome.delay, outcome.result)
    if outcome.settled is not None:  # as the worker does: task_finished once written
        outcome.settled(settlement.ok)
    return job, outcome, settlement


async def _awaited(awaitable: Any) -> Outcome:
    outcome: Outcome = await awaitable
    return outcome


def run_until_settled(queue: str = "default", limit: int = 50) -> list[Outcome]:
    """Run claims of ``queue`` in-process until none is left (waiting for due retries)."""
    outcomes = []
    ledger = queues.get(queue).ledger
    for _ in range(limit):
        ran = run_claimed(queue)
        if ran is None:
            if ledger.stats().pending == 0:
                break
            wait_until(lambda: ledger.stats().pending_due > 0)
            continue
        outcomes.append(ran[1])
    return outcomes


def wait_until(condition: Callable[[], bool], timeout: float = 30.0, step: float = 0.01) -> None:
    """Wait for ``condition`` (a bounded poll, never a bare sleep); fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    event = threading.Event()
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        event.wait(step)


def terminal_state(ledger: Ledger, request_id: str) -> State | None:
    record = ledger.resolve(request_id)
    return None if record is None else record.state


class WorkerProcess:
    """One ``ledger_worker`` process; ``stop`` sends SIGTERM and waits for a clean exit."""

    def __init__(self, redis_url: str, namespace: str, *args: str) -> None:
        env = {
            **os.environ,
            "REDIS_URL": redis_url,
            "LEDGER_NAMESPACE": namespace,
            "DJANGO_SETTINGS_MODULE": "tests.support.tasks_app.settings",
            "PYTHONPATH": str(ROOT),
        }
        self.log = ROOT / ".pytest_cache" / f"worker-{namespace}-{uuid.uuid4().hex[:6]}.log"
        self.log.parent.mkdir(exist_ok=True)
        self._out = self.log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, str(ROOT / "manage.py"), "ledger_worker", *args],
            cwd=ROOT,
            env=env,
            stdout=self._out,
            stderr=subprocess.STDOUT,
        )

    def wait(self, timeout: float = 120) -> int:
        try:
            return self.process.wait(timeout)
        finally:
            self._out.close()

    def stop(self, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def run_burst(redis_url: str, namespace: str, *args: str) -> str:
    """Run ``ledger_worker --burst`` to its end; fail with its output unless it exits 0."""
    worker = WorkerProcess(redis_url, namespace, "--burst", *args)
    code = worker.wait()
    output = worker.output()
    assert code == 0, f"ledger_worker --burst exited {code}:\n{output}"
    return output
