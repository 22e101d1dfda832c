"""``TaskHandler``: how the worker runs Django tasks (``core/worker/handler.py``'s protocol).

``plan`` reads the payload and finds its task (only a ``Task`` object made by ``@task``:
a payload's path is looked up, never called); ``run`` runs one attempt as Django's
``ImmediateBackend`` does (``task_started``, the call, ``task_finished``, with the
result's status, times, worker ids and errors), and returns the outcome with the
result document, which the runtime stores in the same script call as the settlement.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import traceback
from collections.abc import Awaitable
from dataclasses import dataclass, replace
from inspect import iscoroutinefunction
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules, import_string

from ..core.jobs import Attempt, BadPayload, ResultDoc, TaskPayload, decode_result, decode_task
from ..core.jobs import encode_result as encode_result_doc
from ..core.records import State
from ..core.worker.handler import Job, Outcome, Plan
from ..core.worker.interrupt import TimedOut
from .backend import LedgerBackend
from .compat import (
    Task,
    TaskError,
    TaskResult,
    TaskResultStatus,
    normalize_json,
    task_backends,
    task_finished,
    task_started,
)
from .exceptions import ResultTooLarge
from .ledger_task import LedgerTask, LedgerTaskContext
from .options import (
    TaskOptions,
    check_queue,
    exception_path,
    resolve_options,
    retries,
    tighten,
)
from .resolve import resolve_task
from .results import instant
from .state import lost_attempt
from .store import queues

__all__ = ["TRACEBACK_LIMIT", "TaskHandler", "TaskPlan"]

logger = logging.getLogger("django_ledger.tasks")

#: The most characters of one traceback a result keeps (the end, where the error is).
TRACEBACK_LIMIT = 16_384
#: Errors whose tracebacks a result keeps whole: the first, and this many of the last.
KEPT_TRACEBACKS = 16


@dataclass(frozen=True)
class TaskPlan(Plan):
    """A ``Plan`` that carries what ``plan`` found, for ``run``."""

    task: Task[..., Any] | None = None
    payload: TaskPayload | None = None
    options: TaskOptions | None = None


class TaskHandler:
    """Run the Django tasks of ledger queue ``queue``, for backend ``backend_alias``.

    ``backend_alias`` defaults to the first ``LedgerBackend`` of ``TASKS`` that serves
    ``queue``; its class is the sender of the task signals and its ``OPTIONS`` bound
    results.
    """

    def __init__(self, queue: str, backend_alias: str | None = None) -> None:
        self.queue = queue
        self.backend_alias = backend_alias or backend_alias_for(queue)
        # Each installed app's tasks module, once, before any job (as Celery's
        # autodiscovery): a module that does not import stops the worker at its start.
        autodiscover_modules("tasks")

    def __repr__(self) -> str:
        return f"<TaskHandler {self.queue} ({self.backend_alias})>"

    @property
    def backend(self) -> LedgerBackend:
        backend = task_backends[self.backend_alias]
        if not isinstance(backend, LedgerBackend):
            raise ImproperlyConfigured(
                f"TASKS[{self.backend_alias!r}] is {type(backend).__name__}, not a LedgerBackend"
            )
        return backend

    def plan(self, job: Job) -> TaskPlan:
        """Decode the payload and find its task; raise if it names none this queue runs.

        Raising settles the job FAILED, nothing run (``refused`` records why): a payload
        that does not decode, names no task, a task of another queue (``check_queue``),
        or options that loosen the task's and the queue's (``tighten``).
        """
        payload = decode_task(job.claim.payload)
        task = resolve_task(payload.task)
        check_queue(task, self.queue)
        entry = queues.get(self.queue)
        declared = task.ledger_options if isinstance(task, LedgerTask) else {}
        limits = resolve_options(
            declared, entry.options, max_attempts=entry.max_attempts, lease=entry.lease
        )
        options = tighten(limits, payload.options)
        return TaskPlan(
            timeout=options.timeout,
            lease=options.lease,
            name=payload.task,
            is_async=iscoroutinefunction(task.func),
            task=task,
            payload=payload,
            options=options,
        )

    def run(self, job: Job, plan: Plan) -> Outcome | Awaitable[Outcome]:
        """Run one attempt; a coroutine task's run is an awaitable for the worker's loop."""
        attempt = _Attempt(self, job, _checked(plan))
        if attempt.plan.is_async:
            return attempt.run_async()
        return attempt.run_sync()

    def refused(self, job: Job, exc: BaseException) -> Outcome:
        """Settle a job ``plan`` refused: FAILED, with why as its attempt's error."""
        try:
            previous = decode_result(job.previous_result).attempts
        except BadPayload:
            previous = []
        attempts = list(previous)
        while len(attempts) < job.claim.attempt - 1:
            attempts.append(lost_attempt("", len(attempts) + 1))
        error = {"exception_class_path": exception_path(type(exc)), "traceback": _traceback(exc)}
        attempts.append(Attempt(job.worker_id, job.started_at, job.started_at, error))
        doc = encode_result_doc(ResultDoc(_bounded(attempts)))
        return Outcome(State.FAILED, result=doc, reason=f"refused: {exc}")

    def timed_out(self, job: Job, plan: Plan) -> Outcome:
        """Settle an attempt that outlived its timeout as a ``TimeoutError`` it raised."""
        attempt = _Attempt(self, job, _checked(plan))
        try:
            raise TimeoutError(
                f"attempt {job.claim.attempt} of {attempt.plan.name} ran past its timeout "
                f"of {attempt.plan.timeout:g} s"
            )
        except TimeoutError as exc:
            return attempt.raised(exc, timed_out=True)


def backend_alias_for(queue: str) -> str:
    """Return the alias of the first ``LedgerBackend`` in ``TASKS`` that serves ``queue``."""
    for alias, params in task_backends.settings.items():
        try:
            kind = import_string(params["BACKEND"])
        except (ImportError, KeyError):
            continue
        if isinstance(kind, type) and issubclass(kind, LedgerBackend):
            served = params.get("QUEUES", ["default"])
            if not served or queue in served:
                return str(alias)
    raise ImproperlyConfigured(
        f"no django_ledger.tasks.LedgerBackend in TASKS serves queue {queue!r}: add it to "
        "the QUEUES of one"
    )


def _checked(plan: Plan) -> TaskPlan:
    if not isinstance(plan, TaskPlan) or plan.task is None or plan.payload is None:
        raise TypeError("TaskHandler.run takes the plan TaskHandler.plan made")
    return plan


def _traceback(exc: BaseException) -> str:
    text = "".join(traceback.format_exception(exc))
    if not text.isascii():  # a lone surrogate in a message must not make the result unstorable
        text = text.encode("utf-8", "replace").decode("utf-8")
    if len(text) <= TRACEBACK_LIMIT:
        return text
    cut = len(text) - TRACEBACK_LIMIT
    return f"... ({cut:,} characters of this traceback cut)\n" + text[cut:]


def _bounded(attempts: list[Attempt]) -> list[Attempt]:
    """Keep the tracebacks of the first and the last errors whole, the others' last line."""
    failed = [i for i, attempt in enumerate(attempts) if attempt.error]
    if len(failed) <= KEPT_TRACEBACKS + 1:
        return attempts
    short = set(failed[1:-KEPT_TRACEBACKS])
    bounded = []
    for i, attempt in enumerate(attempts):
        if i in short and attempt.error:
            text = attempt.error.get("traceback", "").rstrip("\n")
            error = dict(attempt.error, traceback=text.rpartition("\n")[2] + "\n")
            attempt = replace(attempt, error=error)
        bounded.append(attempt)
    return bounded


class _Attempt:
    """One attempt of one task, from ``task_started`` to its outcome."""

    def __init__(self, handler: TaskHandler, job: Job, plan: TaskPlan) -> None:
        assert plan.task is not None and plan.payload is not None and plan.options is not None
        self.handler = handler
        self.job = job
        self.plan = plan
        self.options = plan.options
        self.backend = handler.backend
        self.clock = time.monotonic()
        try:
            previous = decode_result(job.previous_result)
        except BadPayload as exc:
            logger.warning(
                "task %s: %s; its earlier attempts are not shown", job.claim.request_id, exc
            )
            previous = ResultDoc()
        self.attempts = list(previous.attempts)
        # Attempts claimed but never settled (their worker died) before this one.
        while len(self.attempts) < job.claim.attempt - 1:
            self.attempts.append(lost_attempt("", len(self.attempts) + 1))
        payload = plan.payload
        self.result: TaskResult[..., Any] = TaskResult(
            task=self._task(plan.task, payload),
            id=job.claim.request_id,
            status=TaskResultStatus.RUNNING,
            enqueued_at=instant(getattr(job, "enqueued_at", None)),
            started_at=instant(
                next((a.started_at for a in self.attempts if a.started_at), job.started_at)
            ),
            finished_at=None,
            last_attempted_at=instant(job.started_at),
            args=payload.args,
            kwargs=payload.kwargs,
            backend=handler.backend_alias,
            errors=[
                TaskError(
                    exception_class_path=attempt.error.get("exception_class_path", ""),
                    traceback=attempt.error.get("traceback", ""),
                )
                for attempt in self.attempts
                if attempt.error
            ],
            worker_ids=[attempt.worker_id for attempt in self.attempts] + [job.worker_id],
        )
        self.stage = "call"

    def _task(self, task: Task[..., Any], payload: TaskPayload) -> Task[..., Any]:
        changes: dict[str, Any] = {}
        if task.queue_name != self.handler.queue:
            changes["queue_name"] = self.handler.queue
        if task.backend != self.handler.backend_alias:
            changes["backend"] = self.handler.backend_alias
        if isinstance(task, LedgerTask):
            changes.update(payload.options)
        return replace(task, **changes) if changes else task

    def _arguments(self) -> tuple[list[Any], dict[str, Any]]:
        args = list(self.result.args)
        if self.result.task.takes_context:
            context = LedgerTaskContext(
                task_result=self.result,
                fence=self.job.claim.fence,
                max_attempts=self.options.max_attempts,
            )
            args.insert(0, context)
        return args, self.result.kwargs

    def _now(self) -> int:
        """The Redis clock now, from the attempt's start and this process's steady clock."""
        return self.job.started_at + int((time.monotonic() - self.clock) * 1000)

    def _send(self, signal: Any) -> None:
        if not self.job.cancelled.is_set():
            signal.send(sender=type(self.backend), task_result=self.result)

    def run_sync(self) -> Outcome:
        self._send(task_started)
        func = self.result.task.func
        try:
            args, kwargs = self._arguments()
            value = func(*args, **kwargs)
            self.stage = "result"
            returned = self._returned(value)
        except TimedOut:
            raise  # the worker's own interruption of a run past its time-out (settled)
        except BaseException as exc:
            # Anything else the task raised is its attempt's error: KeyboardInterrupt and
            # GeneratorExit too (a signal never reaches a job's thread: the worker's
            # handlers take it), so the thread, and the worker, go on serving.
            return self.raised(exc)
        return self._completed(returned)

    async def run_async(self) -> Outcome:
        self._send(task_started)
        func = self.result.task.func
        try:
            args, kwargs = self._arguments()
            value = await func(*args, **kwargs)
            self.stage = "result"
            returned = self._returned(value)
        except asyncio.CancelledError as exc:
            if self.job.cancelled.is_set():
                raise  # the worker's time-out cancelled it: timed_out() says how that ends
            return self.raised(exc)  # the task's own, as any other error of its attempt
        except BaseException as exc:
            # KeyboardInterrupt or SystemExit escaping would stop the worker's event loop.
            return self.raised(exc)
        return self._completed(returned)

    def _returned(self, value: Any) -> Any:
        """Normalise the return value as Django does, and hold it to MAX_RESULT_BYTES."""
        normalized = normalize_json(value)
        text = json.dumps(normalized, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        try:
            size = len(text) if text.isascii() else len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise ValueError(f"{self.plan.name} returned text that is not UTF-8: {exc}") from exc
        limit = self.backend.max_result_bytes
        if size > limit:
            raise ResultTooLarge(
                f"{self.plan.name} returned {size:,} bytes of JSON, over the "
                f"MAX_RESULT_BYTES ({limit:,}) of task backend {self.handler.backend_alias!r}"
            )
        return normalized

    def _completed(self, value: Any) -> Outcome:
        finished = self._now()
        self.attempts.append(Attempt(self.job.worker_id, self.job.started_at, finished))
        doc = ResultDoc(_bounded(self.attempts), has_return_value=True, return_value=value)
        object.__setattr__(self.result, "_return_value", value)
        object.__setattr__(self.result, "finished_at", instant(finished))
        object.__setattr__(self.result, "status", TaskResultStatus.SUCCESSFUL)
        self._send(task_finished)
        return Outcome(State.COMPLETED, result=encode_result_doc(doc))

    def raised(self, exc: BaseException, *, timed_out: bool = False) -> Outcome:
        """Record ``exc`` as this attempt's error; call it inside the ``except`` block.

        ``task_finished`` goes out from there, so its receivers (Django's log line)
        see the exception. A retry shows ``READY``: the task will run again.
        """
        path = exception_path(type(exc))
        error = {"exception_class_path": path, "traceback": _traceback(exc)}
        finished = self._now()
        self.attempts.append(Attempt(self.job.worker_id, self.job.started_at, finished, error))
        self.result.errors.append(
            TaskError(exception_class_path=path, traceback=error["traceback"])
        )
        attempt = self.job.claim.attempt
        retry = (
            self.stage == "call"
            and attempt < self.options.max_attempts
            and retries(self.options, exc)
        )
        doc = encode_result_doc(ResultDoc(_bounded(self.attempts)))
        if retry:
            object.__setattr__(self.result, "status", TaskResultStatus.READY)
            outcome = Outcome(
                State.PENDING, self.options.backoff.delay(attempt), result=doc, reason=path
            )
        else:
            object.__setattr__(self.result, "status", TaskResultStatus.FAILED)
            object.__setattr__(self.result, "finished_at", instant(finished))
            outcome = Outcome(State.FAILED, result=doc, reason=path)
        # A run the worker gave up on (timed_out() spoke for it) finishes unheard.
        if timed_out or not self.job.cancelled.is_set():
            task_finished.send(sender=type(self.backend), task_result=self.result)
        return outcome
