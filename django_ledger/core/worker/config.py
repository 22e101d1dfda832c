"""How a worker runs (``WorkerConfig``), and where it reports what it does (``Metrics``)."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from ..results import Claim
from .heartbeat import Heartbeats
from .rooms import Room

__all__ = ["EXIT_RECYCLE", "Metrics", "NoMetrics", "WorkerConfig", "default_worker_id"]

#: What ``Worker.run`` returns after a recycle (``max_tasks_per_child`` or
#: ``max_memory_per_child`` reached): ``EX_TEMPFAIL``, for a supervisor to start another.
EXIT_RECYCLE = 75


def default_worker_id() -> str:
    """Host name, process id and a short random tag: unique across restarts."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


class Metrics(Protocol):
    """Where the worker reports what it does (``metrics.PrometheusMetrics``, or nothing)."""

    def outcome(self, queue: str, name: str, outcome: str, seconds: float | None) -> None: ...
    def lost(self, queue: str) -> None: ...
    def in_flight(self, count: int) -> None: ...
    def depth(self, queue: str, pending: int) -> None: ...
    def data_lost(self) -> None: ...


class NoMetrics:
    """Metrics nobody reads: what a worker built without any reports to."""

    def _ignore(self, *args: object) -> None:
        pass

    outcome = lost = in_flight = depth = data_lost = _ignore


@dataclass
class WorkerConfig:
    """How a worker runs. Durations are seconds."""

    worker_id: str = field(default_factory=default_worker_id)
    #: Jobs running at once (threads; coroutines share the event loop within the bound).
    concurrency: int = 8
    #: Claims held beyond the running ones, ready to start (``None``: as many as running).
    prefetch: int | None = None
    #: Run what is due now, wait for what is in flight, then return 0.
    burst: bool = False
    #: Stop claiming after this many claims, finish them, then return 0.
    max_tasks: int | None = None
    #: Recycle after starting this many tasks: start no more, give back the claims held
    #: unstarted, let the running ones finish and settle, then return ``EXIT_RECYCLE``.
    max_tasks_per_child: int | None = None
    #: Recycle the same way once this process's resident memory passes this many MiB
    #: (read after each settle round).
    max_memory_per_child: float | None = None
    #: How long running jobs get to finish once a stop is asked for.
    shutdown_timeout: float = 30.0
    #: Run repair pages of every queue from inside the worker.
    repair: bool = True
    #: Seconds between repair pages (``None``: a sixth of the shortest lease, 0.5 to 5 s).
    repair_interval: float | None = None
    #: Records per repair page.
    repair_count: int = 100
    #: Write a heartbeat every renewal beat (``None``: no heartbeat).
    heartbeats: Heartbeats | None = None
    #: After a run past its time-out is settled, stop at once and return 3, leaving the
    #: stuck thread to the process's end (``--processes`` children: their parent starts
    #: another process, so a time-out stops the work itself).
    exit_on_timeout: bool = False
    #: Seconds one blocking wait on the wake keys lasts at most (within the client's
    #: ``socket_timeout``): an idle worker sends one ``BZPOPMIN`` per this.
    wake_block: float = 1.0
    #: Seconds a running job gets to stop once it is cancelled; then the process stops at
    #: once and returns 3, as ``exit_on_timeout`` does (``None``: no hard stop). For
    #: ``--processes`` children, whose parent starts another process in its place.
    cancel_grace: float | None = None
    #: Upkeep beaten in the repairer's thread beside repair (``rooms.Room``): the
    #: Django face's outbox relay. Their thread runs with repair off too.
    rooms: tuple[Room, ...] = ()
    #: Called from a run's thread as it starts, with its queue, request id and attempt;
    #: it must return at once (the Django face queues a schedule monitor's check-in).
    started: Callable[[str, str, int], None] | None = None
    #: Called from the main loop for each run settled COMPLETED or FAILED (its
    #: settlement written), with its queue, request id and whether it completed; it must
    #: return at once (the Django face queues a schedule monitor's check-in).
    ended: Callable[[str, str, bool], None] | None = None
    #: Told of each attempt's end, from the thread that learns it: the queue, the claim
    #: and the word of its outcome line (completed, failed, retry, lost). The HTTP runner
    #: answers with them.
    on_outcome: Callable[[str, Claim, str], None] | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.prefetch is not None and self.prefetch < 0:
            raise ValueError(f"prefetch must be 0 or more, got {self.prefetch}")
        if self.max_tasks is not None and self.max_tasks < 1:
            raise ValueError(f"max_tasks must be at least 1, got {self.max_tasks}")
        if self.max_tasks_per_child is not None and self.max_tasks_per_child < 1:
            raise ValueError(
                f"max_tasks_per_child must be at least 1, got {self.max_tasks_per_child}"
            )
        if self.max_memory_per_child is not None and not self.max_memory_per_child > 0:
            raise ValueError(
                f"max_memory_per_child must be more than 0 MiB, got {self.max_memory_per_child}"
            )
        if not self.wake_block > 0:
            raise ValueError(f"wake_block must be more than 0, got {self.wake_block}")
        if self.cancel_grace is not None and not self.cancel_grace >= 0:
            raise ValueError(f"cancel_grace must be 0 or more, got {self.cancel_grace}")
        if self.shutdown_timeout < 0:
            raise ValueError(f"shutdown_timeout must be 0 or more, got {self.shutdown_timeout}")
