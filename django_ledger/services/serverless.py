"""Run due tasks inside a request: the HTTP runner for hosts with no long-lived worker.

``run_due(queue, limit, budget)`` is a ``ledger_worker --burst`` of one request: the
same ``Worker`` (claims under a lease and a fence, renewals, settlements and results in
one script call, retries, time-outs, signals, counters), serving one queue with one
thread, claiming one task at a time, until ``limit`` tasks were claimed, nothing is due,
or ``budget`` seconds have passed. Any number of requests may run at once, on any
number of hosts: each is a worker of its own, so two never hold the same claim and a
late one's outcome is refused by its fence, as between workers.

The budget is shorter than the queue's lease: once it is spent, no more is claimed and
the task running gets the rest of the lease to finish (its lease renewed meanwhile);
one still running then is left to its lease, and repair gives it back to a later run.
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field
from typing import Any

from ..conf import get_ledger, ledger_settings
from ..core.results import Claim
from ..core.worker.runtime import Worker, WorkerConfig
from .worker import handler_for, heartbeats

__all__ = ["MAX_LIMIT", "RunReport", "run_due"]

#: The most tasks one request may ask to run.
MAX_LIMIT = 1000

#: What a run's budget is unless the caller asks for less: this share of the lease.
DEFAULT_SHARE = 0.5


@dataclass
class RunReport:
    """What one request ran: each attempt's end, and the counts."""

    queue: str
    worker_id: str
    budget: float
    seconds: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)
    ran: list[dict[str, Any]] = field(default_factory=list)

    def as_data(self) -> dict[str, Any]:
        return {**asdict(self), "seconds": round(self.seconds, 3)}


def budget_for(queue: str, budget: float | None) -> float:
    """The budget of a run on ``queue``: ``budget`` if shorter than the lease; half of it else.

    ``ValueError`` for a budget that is not a positive number shorter than the lease.
    """
    lease = ledger_settings.queue(queue).lease.total_seconds()
    if budget is None:
        return lease * DEFAULT_SHARE
    if not (math.isfinite(budget) and 0 < budget < lease):
        raise ValueError(f"budget must be more than 0 and less than the lease ({lease:g} s)")
    return budget


def run_due(queue: str, limit: int, budget: float | None = None) -> RunReport:
    """Claim and run up to ``limit`` due tasks of ``queue`` within ``budget`` seconds.

    ``ValueError`` for a limit or a budget out of bounds, or a queue whose handler
    cannot load; ``LedgerError`` (unavailable) when Redis cannot be reached at the start.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be from 1 to {MAX_LIMIT}")
    seconds = budget_for(queue, budget)
    lease = ledger_settings.queue(queue).lease.total_seconds()
    # This request's worker: the Workers page tells it from a ``ledger_worker``.
    worker_id = f"http:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    report = RunReport(queue, worker_id, seconds)

    def told(queue_name: str, claim: Claim, word: str) -> None:
        report.ran.append(
            {
                "id": claim.request_id,
                "outcome": word,
                "attempt": claim.attempt,
                "fence": claim.fence,
            }
        )

    config = WorkerConfig(
        worker_id=report.worker_id,
        concurrency=1,
        prefetch=0,  # one claim at a time: none waits unstarted while the budget runs
        burst=True,
        max_tasks=limit,
        shutdown_timeout=max(0.0, lease - seconds),
        repair=False,  # the workers' and the runner's own repair is not this request's
        heartbeats=heartbeats(),
        on_outcome=told,
    )
    worker = Worker({queue: get_ledger(queue)}, {queue: handler_for(queue)}, {queue: lease}, config)
    timer = threading.Timer(seconds, worker.request_stop)
    timer.daemon = True
    started = time.monotonic()
    timer.start()
    try:
        worker.run()
    finally:
        timer.cancel()
    report.seconds = time.monotonic() - started
    counts = worker.counts
    report.counts = {
        "claimed": counts.claimed,
        "completed": counts.processed - counts.failed,
        "failed": counts.failed,
        "retried": counts.retried,
        "lost": counts.lost,
    }
    # Claimed and neither settled nor lost: still running at the end of the grace, left to
    # their leases (repair gives them back once they end).
    report.counts["unfinished"] = counts.claimed - counts.processed - counts.retried - counts.lost
    return report
