"""One attempt of a Django task in a worker: signals, the call, and its result document.

``TaskHandler.run`` (``handler.py``) makes one ``TaskAttempt`` per claimed job. It runs
the attempt as Django's ``ImmediateBackend`` does (``task_started``, the call,
``task_finished``, with the result's status, times, worker ids and errors) and builds
the outcome's result document once, its return value encoded once, for the runtime to
store in the settlement call it makes anyway. A signal with no receiver is not sent,
and ``TaskResult`` is built only when a receiver or the task's context will see it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from ..core.jobs import (
    MAX_PAYLOAD_DEPTH,
    Attempt,
    BadPayload,
    ResultDoc,
    TaskPayload,
    decode_result,
    too_deep,
)
from ..core.jobs import encode_result as encode_result_doc
from ..core.records import State
from ..core.worker.handler import Job, Outcome, Plan
from ..core.worker.interrupt import TimedOut
from ..queues import queues
from .compat import (
    Task,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_finished,
    task_started,
)
from .exceptions import ResultTooLarge, RetryAfter
from .heard import heard
from .ledger_task import LedgerTaskContext
from .options import TaskOptions, exception_path, retries
from .progress import Reports, start_reports
from .results import _PLAIN, enqueued_as, instant, ready_result
from .state import lost_attempt

__all__ = [
    "KEPT_TRACEBACKS",
    "TRACEBACK_LIMIT",
    "Runner",
    "TaskAttempt",
    "TaskPlan",
    "bounded",
    "earlier_attempts",
    "error_of",
]

logger = logging.getLogger("django_ledger.tasks")

#: The most characters of one traceback a result keeps (the end, where the error is).
TRACEBACK_LIMIT = 16_384
#: Errors whose tracebacks a result keeps whole: the first, and this many of the last.
KEPT_TRACEBACKS = 16
#: A return value as ``core.jobs.encode_result`` encodes it, with its encoder built once.
_encode_value = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


@dataclass(frozen=True)
class TaskPlan(Plan):
    """A ``Plan`` that carries what ``TaskHandler.plan`` found, for ``run``."""

    task: Task[..., Any] | None = None
    payload: TaskPayload | None = None
    options: TaskOptions | None = None


class Runner:
    """What an attempt needs of its handler: the queue, the backend and its result limit."""

    def __init__(self, queue: str, alias: str, backend: Any) -> None:
        self.queue = queue
        self.alias = alias
        self.backend = backend
        #: The backend's class: the sender of the task signals.
        self.sender: type = type(backend)

    @cached_property
    def max_result_bytes(self) -> int:
        """The backend's ``MAX_RESULT_BYTES``, read once (a bad one raises each time)."""
        return int(self.backend.max_result_bytes)


def traceback_text(exc: BaseException) -> str:
    """The traceback a result keeps of ``exc``: UTF-8 safe, its end if it is long."""
    text = "".join(traceback.format_exception(exc))
    if not text.isascii():  # a lone surrogate in a message must not make the result unstorable
        text = text.encode("utf-8", "replace").decode("utf-8")
    if len(text) <= TRACEBACK_LIMIT:
        return text
    cut = len(text) - TRACEBACK_LIMIT
    return f"... ({cut:,} characters of this traceback cut)\n" + text[cut:]


def error_of(exc: BaseException) -> dict[str, str]:
    """An attempt's error as a result document holds it."""
    return {"exception_class_path": exception_path(type(exc)), "traceback": traceback_text(exc)}


def bounded(attempts: list[Attempt]) -> list[Attempt]:
    """Keep the tracebacks of the first and the last errors whole, the others' last line."""
    failed = [i for i, attempt in enumerate(attempts) if attempt.error]
    if len(failed) <= KEPT_TRACEBACKS + 1:
        return attempts
    kept = list(attempts)
    for i in failed[1:-KEPT_TRACEBACKS]:
        error = kept[i].error or {}  # failed: it has one
        text = error.get("traceback", "").rstrip("\n").rpartition("\n")[2] + "\n"
        kept[i] = replace(kept[i], error=dict(error, traceback=text))
    return kept


def earlier_attempts(job: Job) -> list[Attempt]:
    """The attempts before ``job``'s: those stored, then one per claim that never settled."""
    attempts: list[Attempt] = []
    if job.previous_result is not None:
        try:
            attempts = decode_result(job.previous_result).attempts
        except BadPayload as exc:
            logger.warning(
                "task %s: %s; its earlier attempts are not shown", job.claim.request_id, exc
            )
    # Attempts claimed but never settled (their worker died) before this one.
    return attempts + [lost_attempt("", n) for n in range(len(attempts) + 1, job.claim.attempt)]


def document(attempts: list[Attempt], value_json: str | None = None) -> str:
    """Encode a result document, ``value_json`` (encoded already) as its return value.

    The same text as ``core.jobs.encode_result`` (``v``, ``attempts``, ``return_value``).
    """
    head = encode_result_doc(ResultDoc(bounded(attempts)))
    return head if value_json is None else f'{head[:-1]},"return_value":{value_json}}}'


class TaskAttempt:
    """One attempt of one task, from ``task_started`` to its outcome."""

    def __init__(self, runner: Runner, job: Job, plan: TaskPlan) -> None:
        assert plan.task is not None and plan.payload is not None and plan.options is not None
        self.runner = runner
        self.job = job
        self.plan = plan
        self.options = plan.options
        self.clock = time.monotonic()
        self.attempts = earlier_attempts(job) if job.claim.attempt > 1 else []
        self.task = enqueued_as(plan.task, runner.alias, runner.queue, plan.payload.options)
        self.stage = "call"
        # Django's TaskResult, for the signals' receivers and a task's context: built
        # only if one of them will see it. Django's own receivers write a line at INFO
        # (ERROR for a failure, ``raised``), heard only when a handler would write it.
        self.heard_started = heard(task_started, "task_started", logging.INFO)
        self.heard_finished = heard(task_finished, "task_finished", logging.INFO)
        self.result: TaskResult[..., Any] | None = None
        #: What the task reported (``takes_context`` only): written before the outcome.
        self.reports: Reports | None = None
        if self.task.takes_context or self.heard_started or self.heard_finished:
            self.result = self._result()

    def _result(self) -> TaskResult[..., Any]:
        job, payload, attempts = self.job, self.plan.payload, self.attempts
        assert payload is not None
        # Its arguments came out of JSON: normalize_json would hand back equal copies.
        result = ready_result(
            self.task, job.claim.request_id, payload.args, payload.kwargs, self.runner.alias
        )
        started = instant(job.started_at)
        first = next((a.started_at for a in attempts if a.started_at), None)
        put = object.__setattr__  # the frozen dataclass's own __init__ sets fields so too
        put(result, "status", TaskResultStatus.RUNNING)
        put(result, "started_at", started if first is None else instant(first))
        put(result, "last_attempted_at", started)
        put(
            result,
            "errors",
            [
                TaskError(
                    exception_class_path=attempt.error.get("exception_class_path", ""),
                    traceback=attempt.error.get("traceback", ""),
                )
                for attempt in attempts
                if attempt.error
            ],
        )
        put(result, "worker_ids", [attempt.worker_id for attempt in attempts] + [job.worker_id])
        return result

    def _arguments(self) -> tuple[list[Any], dict[str, Any]]:
        payload = self.plan.payload
        assert payload is not None
        args = list(payload.args)
        if self.task.takes_context:
            assert self.result is not None
            self.reports = start_reports(
                queues.get(self.runner.queue).ledger,
                self.job.claim.request_id,
                self.job.claim.fence,
            )
            context = LedgerTaskContext(
                task_result=self.result,
                fence=self.job.claim.fence,
                max_attempts=self.options.max_attempts,
                job=self.job,
                reports=self.reports,
            )
            args.insert(0, context)
        return args, payload.kwargs

    def _now(self) -> int:
        """The Redis clock now, from the attempt's start and this process's steady clock."""
        return self.job.started_at + int((time.monotonic() - self.clock) * 1000)

    def _send(self, signal: Any, heard: bool) -> None:
        if heard and self.result is not None and not self.job.cancelled.is_set():
            signal.send(sender=self.runner.sender, task_result=self.result)

    def run_sync(self) -> Outcome:
        self._send(task_started, self.heard_started)
        try:
            args, kwargs = self._arguments()
            returned = self._returned(self.task.func(*args, **kwargs))
        except TimedOut:
            raise  # the worker's own interruption of a run past its time-out (settled)
        except BaseException as exc:
            # Anything else the task raised is its attempt's error: KeyboardInterrupt and
            # GeneratorExit too (a signal never reaches a job's thread: the worker's
            # handlers take it), so the thread, and the worker, go on serving.
            return self.raised(exc)
        finally:
            self._reported()
        return self._completed(*returned)

    async def run_async(self) -> Outcome:
        self._send(task_started, self.heard_started)
        try:
            args, kwargs = self._arguments()
            returned = self._returned(await self.task.func(*args, **kwargs))
        except asyncio.CancelledError as exc:
            if self.job.cancelled.is_set():
                raise  # the worker's time-out cancelled it: timed_out() says how that ends
            return self.raised(exc)  # the task's own, as any other error of its attempt
        except BaseException as exc:
            # KeyboardInterrupt or SystemExit escaping would stop the worker's event loop.
            return self.raised(exc)
        finally:
            self._reported()
        return self._completed(*returned)

    def _reported(self) -> None:
        """Write what the task reported and is not written yet: before its settlement."""
        if self.reports is not None:
            self.reports.finish(self.plan.name)

    def _returned(self, value: Any) -> tuple[Any, str]:
        """Normalise the return value as Django does, held to MAX_RESULT_BYTES, and encode it."""
        self.stage = "result"  # the call returned: a failure from here on is not retried
        name = self.plan.name
        try:
            normalized = value if value.__class__ in _PLAIN else normalize_json(value)
            text = _encode_value(normalized)
        except RecursionError as exc:  # normalize_json and json recurse
            raise ValueError(
                f"The return value of {name} refers to itself or nests too deep to be stored"
            ) from exc
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"The return value of {name} cannot be stored as JSON: {exc}") from exc
        if too_deep(text):
            raise ValueError(
                f"The return value of {name} nests deeper than {MAX_PAYLOAD_DEPTH} levels of "
                "arrays and objects: it could not be read back"
            )
        try:
            size = len(text) if text.isascii() else len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise ValueError(f"{self.plan.name} returned text that is not UTF-8: {exc}") from exc
        limit = self.runner.max_result_bytes
        if size > limit:
            raise ResultTooLarge(
                f"{self.plan.name} returned {size:,} bytes of JSON, over the "
                f"MAX_RESULT_BYTES ({limit:,}) of task backend {self.runner.alias!r}"
            )
        return normalized, text

    def _completed(self, value: Any, text: str) -> Outcome:
        finished = self._now()
        self.attempts.append(Attempt(self.job.worker_id, self.job.started_at, finished))
        outcome = Outcome(State.COMPLETED, result=document(self.attempts, text))
        result = self.result
        if result is not None:
            put = object.__setattr__
            put(result, "_return_value", value)
            put(result, "finished_at", instant(finished))
            put(result, "status", TaskResultStatus.SUCCESSFUL)
            if self.heard_finished and not self.job.cancelled.is_set():
                outcome = replace(outcome, settled=self._finished(result))
        return outcome

    def _finished(
        self, result: TaskResult[..., Any], exc: BaseException | None = None
    ) -> Callable[[bool], None]:
        """What sends ``task_finished`` once the attempt's settlement is answered.

        Only a settlement that was written: one refused (an operator failed the record
        meanwhile, the lease ended while the worker was paused) did not end the task as
        ``result`` says, and the worker's ``outcome=lost`` line tells of it instead. With
        ``exc``, sent as if from its ``except`` block: receivers see the exception.
        """
        sender = self.runner.sender

        def settled(written: bool) -> None:
            if not written:
                return
            if exc is None:
                task_finished.send(sender=sender, task_result=result)
                return
            traceback = exc.__traceback__
            try:
                raise exc
            except BaseException:
                exc.__traceback__ = traceback  # the attempt's own, not this frame's
                task_finished.send(sender=sender, task_result=result)

        return settled

    def raised(self, exc: BaseException, *, timed_out: bool = False) -> Outcome:
        """Record ``exc`` as this attempt's error.

        ``task_finished`` goes out once the settlement is written (``Outcome.settled``),
        as from an ``except`` block of ``exc``, so its receivers (Django's log line) see
        the exception. A retry shows ``READY``: the task will run again.
        """
        error = error_of(exc)
        path = error["exception_class_path"]
        finished = self._now()
        attempt = self.job.claim.attempt
        # A RetryAfter asks for a retry at its time, whatever retry_on says.
        asked = exc.seconds if isinstance(exc, RetryAfter) else None
        retry = (
            self.stage == "call"
            and attempt < self.options.max_attempts
            and (asked is not None or retries(self.options, exc))
        )
        # A failure's line is at ERROR (error trackers read it): heard on its own terms.
        loud = self.heard_finished or (
            not retry and heard(task_finished, "task_finished", logging.ERROR)
        )
        if loud and self.result is None:
            self.result = self._result()  # before this attempt joins the earlier ones
        self.attempts.append(Attempt(self.job.worker_id, self.job.started_at, finished, error))
        doc = document(self.attempts)
        if retry:
            status = TaskResultStatus.READY
            wait = self.options.backoff.delay(attempt) if asked is None else asked
            outcome = Outcome(State.PENDING, wait, result=doc, reason=path)
        else:
            status = TaskResultStatus.FAILED
            outcome = Outcome(State.FAILED, result=doc, reason=path)
        result = self.result
        if result is not None:
            result.errors.append(TaskError(exception_class_path=path, traceback=error["traceback"]))
            object.__setattr__(result, "status", status)
            if not retry:
                object.__setattr__(result, "finished_at", instant(finished))
            # A run the worker gave up on (timed_out() spoke for it) finishes unheard.
            if loud and (timed_out or not self.job.cancelled.is_set()):
                outcome = replace(outcome, settled=self._finished(result, exc))
        return outcome
