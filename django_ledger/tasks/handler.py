"""``TaskHandler``: how the worker runs Django tasks (``core/worker/handler.py``'s protocol).

``plan`` reads the payload and finds its task (only a ``Task`` object made by ``@task``:
a payload's path is looked up, never called); ``run`` runs one attempt as Django's
``ImmediateBackend`` does (``task_started``, the call, ``task_finished``, with the
result's status, times, worker ids and errors), and returns the outcome with the
result document, which the runtime stores in the same script call as the settlement.
"""

from __future__ import annotations

import sys
from collections.abc import Coroutine
from inspect import iscoroutinefunction
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import autodiscover_modules, import_string

from ..core.jobs import Attempt, decode_task
from ..core.records import State
from ..core.worker.handler import Job, Outcome, Plan
from ..queues import QueueEntry, queues
from .attempt import (
    KEPT_TRACEBACKS,
    TRACEBACK_LIMIT,
    Runner,
    TaskAttempt,
    TaskPlan,
    document,
    earlier_attempts,
    error_of,
)
from .backend import LedgerBackend
from .compat import Task, task_backends
from .options import TaskOptions, tighten
from .plans import task_limits
from .resolve import resolve_task

__all__ = ["KEPT_TRACEBACKS", "TRACEBACK_LIMIT", "TaskHandler", "TaskPlan"]


class TaskHandler:
    """Run the Django tasks of ledger queue ``queue``, for backend ``backend_alias``.

    ``backend_alias`` defaults to the first ``LedgerBackend`` of ``TASKS`` that serves
    ``queue``; its class is the sender of the task signals and its ``OPTIONS`` bound
    results.
    """

    def __init__(self, queue: str, backend_alias: str | None = None) -> None:
        self.queue = queue
        self.backend_alias = backend_alias or backend_alias_for(queue)
        # Per task path, what planning found, checked again cheaply for every job rather
        # than found again: (the module's namespace, the name, the task) and (the task, the
        # queue entry, its limits, whether it is a coroutine function). A module attribute
        # rebound, or LEDGER replaced (a new queue entry), finds and resolves afresh.
        self._found: dict[str, tuple[dict[str, Any], str, Task[..., Any]]] = {}
        self._limits: dict[str, tuple[Task[..., Any], QueueEntry, TaskOptions, bool]] = {}
        #: The backend, with the TASKS settings it was built under (``override_settings``
        #: replaces them, and Django's handler its backends).
        self._runner: tuple[object, LedgerBackend, Runner] | None = None
        # Each installed app's tasks module, once, before any job (as Celery's
        # autodiscovery): a module that does not import stops the worker at its start.
        autodiscover_modules("tasks")

    def __repr__(self) -> str:
        return f"<TaskHandler {self.queue} ({self.backend_alias})>"

    def _current(self) -> tuple[object, LedgerBackend, Runner]:
        """The backend and what attempts need of it, while the TASKS setting stays."""
        settings = task_backends.settings
        known = self._runner
        if known is not None and known[0] is settings:
            return known
        backend = task_backends[self.backend_alias]
        if not isinstance(backend, LedgerBackend):
            raise ImproperlyConfigured(
                f"TASKS[{self.backend_alias!r}] is {type(backend).__name__}, not a LedgerBackend"
            )
        runner = Runner(self.queue, self.backend_alias, backend)
        self._runner = (settings, backend, runner)
        return self._runner

    def plan(self, job: Job) -> TaskPlan:
        """Decode the payload and find its task; raise if it names none this queue runs.

        Raising settles the job FAILED, nothing run (``refused`` records why): a payload
        that does not decode, names no task, a task of another queue (``check_queue``),
        or options that loosen the task's and the queue's (``tighten``).
        """
        payload = decode_task(job.claim.payload)
        path = payload.task
        task = self._task(path)
        entry = queues.get(self.queue)
        known = self._limits.get(path)
        if known is not None and known[0] is task and known[1] is entry:
            limits, is_async = known[2], known[3]
        else:
            limits = task_limits(task, self.queue, entry)
            is_async = iscoroutinefunction(task.func)
            self._limits[path] = (task, entry, limits, is_async)
        options = tighten(limits, payload.options) if payload.options else limits
        return TaskPlan(
            timeout=options.timeout,
            lease=options.lease,
            name=path,
            is_async=is_async,
            task=task,
            payload=payload,
            options=options,
        )

    def _task(self, path: str) -> Task[..., Any]:
        """``resolve_task(path)``, once per path while the module still binds that task."""
        found = self._found.get(path)
        if found is not None:
            namespace, name, known = found
            bound: object = namespace.get(name)
            if bound is known:
                return known
        task = resolve_task(path)
        module_name, _, name = path.rpartition(".")
        self._found[path] = (vars(sys.modules[module_name]), name, task)
        return task

    def run(self, job: Job, plan: Plan) -> Outcome | Coroutine[Any, Any, Outcome]:
        """Run one attempt; a coroutine task's run is an awaitable for the worker's loop."""
        attempt = TaskAttempt(self._current()[2], job, _checked(plan))
        if attempt.plan.is_async:
            return attempt.run_async()
        return attempt.run_sync()

    def refused(self, job: Job, exc: BaseException) -> Outcome:
        """Settle a job ``plan`` refused: FAILED, with why as its attempt's error."""
        attempts = earlier_attempts(job)
        attempts.append(Attempt(job.worker_id, job.started_at, job.started_at, error_of(exc)))
        return Outcome(State.FAILED, result=document(attempts), reason=f"refused: {exc}")

    def timed_out(self, job: Job, plan: Plan) -> Outcome:
        """Settle an attempt that outlived its timeout as a ``TimeoutError`` it raised."""
        attempt = TaskAttempt(self._current()[2], job, _checked(plan))
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


def task_options(queue: str, payload: str) -> TaskOptions:
    """The options a worker of ``queue`` would run this task payload with.

    Raise (``BadPayload``, ``UnknownTask``, ``TaskRefused``...) where a worker would
    refuse it. For pages that say what a record's task allows, as its ``max_attempts``.
    """
    document = decode_task(payload)
    limits = task_limits(resolve_task(document.task), queue, queues.get(queue))
    return tighten(limits, document.options) if document.options else limits
