"""Run what is due in-process, as a worker would: the testing kit's ``run_due_tasks()``
and ``LedgerBackend``'s ``OPTIONS["EAGER"]``.

Each task is claimed from the ledger, planned and run by ``TaskHandler`` (the handler a
``ledger_worker`` uses) on the calling thread, then settled for real: its result, its
retries and its workflow's next steps are written by the same scripts as in production.
So a ``TestCase``'s transaction is the task's, and a step released by a settlement is due
on the next turn of the loop, which runs until nothing is due (or ``limit`` runs).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from ..core.records import State
from ..core.worker.handler import Job, Outcome
from ..queues import queues as ledger_queues
from .handler import TaskHandler
from .store import read_tasks

__all__ = ["RunReport", "TaskFailed", "run_due_tasks", "run_eagerly_after"]

#: The worker id the runs record (``TaskResult.worker_ids``).
WORKER_ID = "run-due-tasks"
#: The lease each run holds: long enough for any test's task, short enough to be repaired.
LEASE_SECONDS = 300.0
#: The most runs ``run_due_tasks`` makes unless told otherwise: a task that enqueues
#: itself would otherwise run for ever.
DEFAULT_LIMIT = 10_000
#: A retry due within this many seconds of its failure is waited for and run in the same
#: call (a test's task with a short backoff); one further away is left waiting.
RETRY_WAIT_SECONDS = 1.0


class TaskFailed(AssertionError):
    """A task run by ``run_due_tasks`` failed for good: says which, with its traceback."""


@dataclass
class RunReport:
    """What ``run_due_tasks`` ran: ids by how each run ended, in the order they ran."""

    completed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    #: Attempts that failed and left their task to a retry.
    retrying: list[str] = field(default_factory=list)
    #: The queue of each id that ran.
    queue_of: dict[str, str] = field(default_factory=dict)

    @property
    def ran(self) -> int:
        """How many runs were made."""
        return len(self.completed) + len(self.failed) + len(self.retrying)


_running = threading.local()


def run_due_tasks(
    queues: Iterable[str],
    *,
    limit: int = DEFAULT_LIMIT,
    raise_errors: bool = True,
) -> RunReport:
    """Run every task due on ``queues`` until none is due; the report says how each ended.

    With ``raise_errors``, a task that fails for good raises ``TaskFailed`` at once, and
    one left waiting for its retry raises it at the end. Past ``limit`` runs with tasks
    still due: ``RuntimeError``.
    """
    if isinstance(queues, str):
        raise TypeError("queues must be a list of queue names, not one string")
    names = list(queues)
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    handlers = {name: TaskHandler(name) for name in names}
    report = RunReport()
    _running.depth = getattr(_running, "depth", 0) + 1
    try:
        _drain(handlers, report, limit, raise_errors)
    finally:
        _running.depth -= 1
    waiting = [request_id for request_id in report.retrying if request_id not in report.completed]
    if raise_errors and waiting:
        # Its retry was not due before everything else was done: a test would
        # otherwise see a task still READY and no reason why.
        first = waiting[0]
        queue = report.queue_of[first]
        ledger = ledger_queues.get(queue).ledger
        raise TaskFailed(_failure(ledger, queue, first, "failed and waits for a retry"))
    return report


def run_eagerly_after(backend: Any, results: list[Any]) -> None:
    """``LedgerBackend``'s ``EAGER``: run what is due on its queues, then refresh ``results``.

    An enqueue staged in a transaction runs when it commits (outbox rows delivered
    inline; with background delivery, ``run_due_tasks`` runs them once delivered).
    """
    names = backend.lookup_queues()
    if backend.staging():
        database = backend.transactions.database
        transaction.on_commit(lambda: run_eagerly(names), using=database)
        return
    run_eagerly(names)
    for result in results:
        result.refresh()


def run_eagerly(queues: list[str]) -> None:
    """Run what is due on ``queues`` now (``OPTIONS["EAGER"]``), failures recorded, not raised.

    Inside a run (a task that enqueues), nothing: the outer loop runs the new task once
    the task that enqueued it has returned, so tasks never run inside each other.
    """
    if getattr(_running, "depth", 0):
        return
    run_due_tasks(queues, raise_errors=False)


def _drain(
    handlers: dict[str, TaskHandler], report: RunReport, limit: int, raise_errors: bool
) -> None:
    names = list(handlers)
    soon: dict[str, float] = {}  # retries waited for: id -> when its backoff ends (monotonic)
    while True:
        ran_any = False
        for name, handler in handlers.items():
            while _run_one(name, handler, report, soon, raise_errors):
                ran_any = True
                if report.ran >= limit and _anything_due(names):
                    raise RuntimeError(
                        f"run_due_tasks made {limit} runs and tasks are still due: "
                        "does a task enqueue itself? Pass a higher limit if not."
                    )
        if not ran_any and not _wait_for_a_retry(soon):
            return


def _wait_for_a_retry(soon: dict[str, float]) -> bool:
    """Wait for the nearest short retry still owed; ``False`` when none is.

    The store judges due times by the Redis server's clock, so a retry may still be a
    moment away when this clock says it is due: it is waited for until a second past it.
    """
    now = time.monotonic()
    for request_id, due in list(soon.items()):
        if now > due + RETRY_WAIT_SECONDS:
            del soon[request_id]  # someone else ran it, or it was cancelled
    if not soon:
        return False
    time.sleep(min(max(min(soon.values()) - now, 0.0) + 0.001, 0.05))
    return True


def _run_one(
    queue: str,
    handler: TaskHandler,
    report: RunReport,
    soon: dict[str, float],
    raise_errors: bool,
) -> bool:
    """Claim, run and settle one task of ``queue``; ``False`` if none is due."""
    ledger = ledger_queues.get(queue).ledger
    claim = ledger.claim(WORKER_ID, LEASE_SECONDS)
    if claim is None:
        return False
    previous = ledger.results([claim.request_id])[0] if claim.attempt > 1 else None
    job = Job(
        claim=claim,
        queue=queue,
        worker_id=WORKER_ID,
        started_at=claim.lease_until - int(LEASE_SECONDS * 1000),
        previous_result=previous,
    )
    try:
        plan = handler.plan(job)
    except Exception as exc:  # as the worker: a job that cannot be planned fails at once
        outcome = handler.refused(job, exc)
    else:
        ran = handler.run(job, plan)
        outcome = ran if isinstance(ran, Outcome) else asyncio.run(ran)
    settlement = ledger.settle(claim, outcome.state, outcome.delay, outcome.result)
    if outcome.settled is not None:  # task_finished, once the settlement is written
        outcome.settled(settlement.ok)
    request_id = claim.request_id
    report.queue_of[request_id] = queue
    soon.pop(request_id, None)
    if outcome.state is State.COMPLETED:
        report.completed.append(request_id)
        return True
    if outcome.state is not State.FAILED:
        report.retrying.append(request_id)
        if outcome.delay <= RETRY_WAIT_SECONDS:
            soon[request_id] = time.monotonic() + outcome.delay
        return True
    report.failed.append(request_id)
    if raise_errors:
        raise TaskFailed(_failure(ledger, queue, request_id, f"failed: {outcome.reason}"))
    return True


def _failure(ledger: Any, queue: str, request_id: str, what: str) -> str:
    """Say which task failed and how, with the traceback its attempt recorded."""
    state = read_tasks([ledger], [request_id])[0]
    task = state.task_path if state is not None else None
    errors = state.errors if state is not None else []
    lines = [f"task {task or '?'} ({request_id}, queue {queue!r}) {what}"]
    if errors:
        lines.append(errors[-1].get("traceback", "").rstrip())
    return "\n".join(lines)


def _anything_due(names: list[str]) -> bool:
    return any(ledger_queues.get(name).ledger.stats().pending_due > 0 for name in names)
