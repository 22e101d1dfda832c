"""What the worker runs: a handler turns one claimed job into an outcome.

The runtime (``runtime.py`` and the modules beside it) owns everything Redis: claims,
renewals, settlements, repair. A handler owns what a job means. ``TaskHandler`` (in the
Django layer) runs Django tasks; ``CallableHandler`` wraps a plain function for raw
queues (``LEDGER['QUEUES'][name]['HANDLER']``), with the retry policy below.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..records import State
from ..results import Claim
from .interrupt import TimedOut

__all__ = [
    "Backoff",
    "CallableHandler",
    "CancelNotice",
    "Flag",
    "Handler",
    "Job",
    "Outcome",
    "Plan",
]

log = logging.getLogger("django_ledger.worker")


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: a uniform draw from 0 to min(cap, base * 2**n).

    ``n`` is the number of attempts made before this retry (0 after the first). Defaults:
    the first retry within 5 s, the second within 10 s, ... never more than 10 minutes.
    """

    base: float = 5.0
    cap: float = 600.0

    def __post_init__(self) -> None:
        if not (0 < self.base <= self.cap):
            raise ValueError(f"backoff needs 0 < base <= cap, got {self.base} and {self.cap}")

    def ceiling(self, attempt: int) -> float:
        """The most a retry after ``attempt`` attempts waits, in seconds."""
        return float(min(self.cap, self.base * 2 ** max(0, min(attempt - 1, 60))))

    def delay(self, attempt: int, rng: random.Random | None = None) -> float:
        return (rng or random).uniform(0, self.ceiling(attempt))


class Flag:
    """A flag set once, read from any thread: ``set`` and ``is_set`` as ``threading.Event``.

    Without an Event's condition and lock: two of them come with every job, and nothing
    waits on them (a plain attribute write is atomic).
    """

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value = False

    def set(self) -> None:
        self._value = True

    def is_set(self) -> bool:
        return self._value


@dataclass(frozen=True)
class CancelNotice:
    """A running job cancelled (``Ledger.cancel``): who, when (epoch ms, the server's clock), why.

    Its record has ended FAILED already: whatever the run settles is refused by its fence.
    """

    by: str
    at: int
    reason: str = ""


@dataclass
class Job:
    """One claimed record on its way through a worker."""

    claim: Claim
    queue: str
    worker_id: str
    #: When this attempt started, in epoch ms by the Redis server's clock.
    started_at: int
    #: The result document stored by earlier attempts (``None`` on a first attempt).
    previous_result: bytes | None = None
    #: Set when a renewal answered LOST: the outcome of this run will be refused.
    lost: Flag = field(default_factory=Flag)
    #: Set when the worker gives up waiting for this run (time-out or a forced stop).
    cancelled: Flag = field(default_factory=Flag)
    #: Set when the worker hears that an operator cancelled this run (``core/worker/
    #: cancels.py``): a handler checks it between steps and stops.
    cancel: CancelNotice | None = None


@dataclass(frozen=True)
class Plan:
    """What the runtime needs to know of a job before running it."""

    #: Seconds the run may take, or ``None`` for no limit.
    timeout: float | None = None
    #: The lease renewals ask for, in seconds (``None``: the queue's).
    lease: float | None = None
    #: A label for logs and metrics (the task path for tasks).
    name: str = ""
    #: Whether the run is a coroutine function's (run on the worker's event loop).
    is_async: bool = False


@dataclass(frozen=True)
class Outcome:
    """How a run settles: COMPLETED, FAILED, or PENDING again after ``delay`` seconds."""

    state: State
    delay: float = 0.0
    #: Stored with the settlement (``Ledger.settle(..., result=)``).
    result: str | None = None
    #: Why, for the outcome's log line (an exception class path, "timeout", ...).
    reason: str = ""
    #: Called once the settlement is answered, with whether it was written (``False``:
    #: refused, the lease lost): what a run announces of its end waits for the truth.
    #: Not called for an outcome never settled (lost before, or left at a forced stop).
    settled: Callable[[bool], None] | None = field(default=None, compare=False)


#: A completion with no result (outcomes are frozen: one serves every such run).
_COMPLETED = Outcome(State.COMPLETED)


class Handler(Protocol):
    """Turns jobs into outcomes. Every method is called from worker threads."""

    def plan(self, job: Job) -> Plan:
        """Say how to run ``job`` (cheap: no I/O); raising settles it FAILED at once."""
        ...

    def run(self, job: Job, plan: Plan) -> Outcome | Awaitable[Outcome]:
        """Run ``job``; an exception escaping is a bug of the handler, settled as a retry."""
        ...

    def timed_out(self, job: Job, plan: Plan) -> Outcome:
        """Say how a run that outlived ``plan.timeout`` settles (it is not waited for)."""
        ...


class CallableHandler:
    """Call ``func(job)`` for each job: a return completes it, an exception retries it.

    Retries back off (``Backoff``) until ``max_attempts`` claims, then FAILED; any other
    ``BaseException`` fails it at once (``escaped``). ``func`` may return a string,
    stored as the result; a coroutine function runs on the loop.
    """

    def __init__(
        self,
        func: Callable[[Job], Any],
        *,
        max_attempts: int,
        backoff: Backoff | None = None,
        timeout: float | None = None,
    ) -> None:
        import inspect

        self.func = func
        self.max_attempts = max_attempts
        self.backoff = backoff or Backoff()
        self.timeout = timeout
        self.is_async = inspect.iscoroutinefunction(func)
        self.name = getattr(func, "__qualname__", repr(func))
        # The same for every job, and frozen: one for all of them.
        self._plan = Plan(timeout=self.timeout, name=self.name, is_async=self.is_async)

    def plan(self, job: Job) -> Plan:
        return self._plan

    def run(self, job: Job, plan: Plan) -> Outcome | Awaitable[Outcome]:
        if self.is_async:
            return self._run_async(job)
        try:
            value = self.func(job)
        except Exception as exc:
            return self.failed(job, exc)
        except TimedOut:
            raise  # the worker's own interruption of a run past its time-out (settled)
        except BaseException as exc:
            return self.escaped(job, exc)
        return self.completed(value)

    async def _run_async(self, job: Job) -> Outcome:
        try:
            value = await self.func(job)
        except Exception as exc:
            return self.failed(job, exc)
        except BaseException as exc:
            if isinstance(exc, asyncio.CancelledError) and job.cancelled.is_set():
                raise  # the worker's time-out cancelled it: timed_out() says how it ends
            return self.escaped(job, exc)
        return self.completed(value)

    def completed(self, value: Any) -> Outcome:
        return Outcome(State.COMPLETED, result=value) if isinstance(value, str) else _COMPLETED

    def failed(self, job: Job, exc: BaseException) -> Outcome:
        reason = f"{type(exc).__module__}.{type(exc).__qualname__}"
        if job.claim.attempt >= self.max_attempts:
            return Outcome(State.FAILED, reason=reason)
        return Outcome(State.PENDING, self.backoff.delay(job.claim.attempt), reason=reason)

    def escaped(self, job: Job, exc: BaseException) -> Outcome:
        """Fail at once a run that raised a ``BaseException`` that is not an ``Exception``.

        ``SystemExit``, ``KeyboardInterrupt`` (never a signal: the worker's handlers take
        those), ``GeneratorExit``, a ``CancelledError`` the worker did not cause: as for a
        Django task, they would end the same way again. The traceback goes to the log,
        the record's only account of a raw run.
        """
        reason = f"{type(exc).__module__}.{type(exc).__qualname__}"
        log.error(
            "queue %s: %s (attempt %d) raised %s: failed",
            job.queue,
            job.claim.request_id,
            job.claim.attempt,
            reason,
            exc_info=exc,
        )
        return Outcome(State.FAILED, reason=reason)

    def timed_out(self, job: Job, plan: Plan) -> Outcome:
        return self.failed(job, TimeoutError(f"ran past {plan.timeout} s"))
