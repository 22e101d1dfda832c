"""``LedgerBackend``: Django's task backend on the delivery ledger.

``TASKS = {"default": {"BACKEND": "django_ledger.tasks.LedgerBackend", "QUEUES":
["default"], "OPTIONS": {}}}``. An enqueue is one admission (one script call): the task
becomes a record of the queue named by its ``queue_name``, its ``TaskResult.id`` the
record's request id; ``run_after`` becomes the record's due time on the Redis clock and
``priority`` its priority. ``manage.py ledger_worker`` runs what is due
(``handler.TaskHandler``); ``get_result`` reads record and result from any process.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any, TypeVar, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from typing_extensions import ParamSpec

from ..core.jobs import PayloadTemplate
from ..core.records import id_problem
from ..core.results import Admission, AdmissionStatus
from ..core.timing import instant_ms
from .compat import (
    DEFAULT_TASK_QUEUE_NAME,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    task_enqueued,
)
from .exceptions import QueueFull, TaskIdConflict
from .ledger_task import LedgerTask
from .options import BACKEND_OPTION_DEFAULTS, backend_option_problem
from .resolve import declared_task, random_id, unique_id
from .results import instant, new_result, plain_call, ready_result, task_of, task_result
from .state import TaskState
from .store import QueueEntry, queues, read_tasks

__all__ = ["LedgerBackend"]

logger = logging.getLogger("django_ledger.tasks")

_P = ParamSpec("_P")
_R = TypeVar("_R")
#: One call of a task: positional and keyword arguments.
Call = tuple[Sequence[Any], Mapping[str, Any]]
#: Plans kept per backend (declared tasks: module-level, so few); past it, all are dropped.
_MAX_PLANS = 4096


@dataclass(frozen=True, slots=True)
class _Plan:
    """What every call of one task shares: its queue, its id rule, its payload template."""

    entry: QueueEntry
    path: str
    unique: bool
    template: PayloadTemplate


class LedgerBackend(BaseTaskBackend):
    """Tasks as ledger records: deferred, prioritised, retried, with results in Redis."""

    task_class = LedgerTask
    supports_defer = True
    supports_priority = True
    supports_get_result = True
    supports_async_task = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        #: ``QUEUES`` in the order given: ``get_result`` looks for an id in this order.
        self.queue_order: list[str] = list(params.get("QUEUES", [DEFAULT_TASK_QUEUE_NAME]))
        self._validated: dict[tuple[Any, ...], None] = {}
        #: Declared tasks' plans by ``id(task)``, each with its task (ids are reused).
        self._plans: dict[int, tuple[Task[..., Any], _Plan]] = {}

    # -- options ----------------------------------------------------------------------

    @property
    def max_result_bytes(self) -> int:
        """``OPTIONS['MAX_RESULT_BYTES']``: the most a task's JSON return value may take."""
        for name, value in self.options.items():
            problem = backend_option_problem(name, value)
            if problem is not None:
                raise ImproperlyConfigured(f"TASKS[{self.alias!r}]['OPTIONS']: {problem}")
        limit: int = self.options.get(
            "MAX_RESULT_BYTES", BACKEND_OPTION_DEFAULTS["MAX_RESULT_BYTES"]
        )
        return limit

    def check(self, **kwargs: Any) -> list[Any]:
        """Nothing here: ``django_ledger``'s own checks (``checks/tasks.py``) cover it."""
        return []

    # -- validation -------------------------------------------------------------------

    def validate_task(self, task: Task[..., Any]) -> None:
        """Django's checks (once per task shape), and ``run_after`` as a timedelta too."""
        key = (
            task.func,
            task.priority,
            task.queue_name,
            task.takes_context,
            self.supports_async_task,
            self.supports_priority,
        )
        if key not in self._validated:
            shape = SimpleNamespace(
                func=task.func,
                priority=task.priority,
                queue_name=task.queue_name,
                takes_context=task.takes_context,
                run_after=None,
            )
            super().validate_task(cast("Task[..., Any]", shape))
            if len(self._validated) > 4096:
                self._validated.clear()
            self._validated[key] = None
        run_after: object = task.run_after
        if run_after is None or isinstance(run_after, timedelta):
            return
        if not isinstance(run_after, datetime):
            raise InvalidTask(
                f"run_after must be a datetime or a timedelta, not {type(run_after).__name__}."
            )
        if settings.USE_TZ and timezone.is_naive(run_after):
            raise InvalidTask("run_after must be an aware datetime.")

    def _queue(self, name: str) -> QueueEntry:
        try:
            return queues.get(name)
        except ImproperlyConfigured:
            if queues.known(name):
                raise
        known = ", ".join(repr(queue) for queue in queues.names()) or "none"
        raise InvalidTask(
            f"Queue {name!r} is not a queue of LEDGER['QUEUES'] (it configures {known}); "
            "add it there (system check django_ledger.E060 says so too)."
        )

    # -- enqueue ----------------------------------------------------------------------

    def enqueue(
        self, task: Task[_P, _R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[_P, _R]:
        """Admit one call of ``task``; a unique task's repeat answers the existing result."""
        return self._enqueue_one(task, args, kwargs, None, given=False)

    def enqueue_once(
        self, task: Task[_P, _R], request_id: str, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> TaskResult[_P, _R]:
        """Admit one call under ``request_id``, once: a repeat answers the existing result."""
        return self._enqueue_one(task, args, kwargs, request_id, given=True)

    def _enqueue_one(
        self,
        task: Task[_P, _R],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        request_id: object,
        *,
        given: bool,
    ) -> TaskResult[_P, _R]:
        # enqueue_many's steps for one call, without its lists and batching.
        plan = self._plan(task)
        result, payload = self._request(plan, task, args, kwargs, request_id, given=given)
        entry = plan.entry
        answer = entry.ledger.admit(
            result.id, payload, self._delay(task, entry), priority=task.priority
        )
        if answer.times is not None:  # admitted just now: the common answer, without lists
            self._admitted(task, result, *answer.times, made={})
            return result
        return self._answered(task, entry, [result], [answer])[0]

    def enqueue_many(
        self,
        task: Task[_P, _R],
        calls: Iterable[Call],
        ids: Sequence[str] | None = None,
    ) -> list[TaskResult[_P, _R]]:
        """Admit many calls of one task, 128 per script call; results in input order.

        Every call is checked (JSON arguments, payload size, ids) before anything is
        written. Past that, as ``Ledger.admit_many``, it is not all-or-nothing: a
        ``TaskIdConflict`` or ``QueueFull`` is raised after the calls before it (and
        those after it in the same batch) were admitted.
        """
        plan = self._plan(task)
        calls = list(calls)
        if ids is not None and len(ids) != len(calls):
            raise ValueError(f"enqueue_many got {len(ids)} ids for {len(calls)} calls")
        results: list[TaskResult[_P, _R]] = []
        requests: list[tuple[str, str]] = []
        for position, (args, kwargs) in enumerate(calls):
            result, payload = self._request(
                plan,
                task,
                args,
                kwargs,
                None if ids is None else ids[position],
                given=ids is not None,
            )
            results.append(result)
            requests.append((result.id, payload))
        if not requests:
            return []
        entry = plan.entry
        answers = entry.ledger.admit_many(
            requests, self._delay(task, entry), priority=task.priority
        )
        return self._answered(task, entry, results, answers)

    def _plan(self, task: Task[..., Any]) -> _Plan:
        """Check ``task`` and return what its calls share, kept for a declared task."""
        kept = self._plans.get(id(task))
        # Django's checks passed when a kept plan was made, and a task is frozen; its
        # module binding and its queue's settings may have changed since.
        if (
            kept is not None
            and kept[0] is task
            and task.run_after is None
            and declared_task(task) is task
            and kept[1].entry is self._queue(task.queue_name)
        ):
            return kept[1]
        self.validate_task(task)
        declared = declared_task(task)
        entry = self._queue(task.queue_name)
        unique = getattr(task, "unique", None)
        if unique is None:
            unique = bool(entry.options.get("unique", False))
        path = task.module_path
        plan = _Plan(entry, path, unique, PayloadTemplate(path, _payload_options(task, declared)))
        if task is declared:
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            self._plans[id(task)] = (task, plan)
        return plan

    def _request(
        self,
        plan: _Plan,
        task: Task[_P, _R],
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        request_id: object,
        *,
        given: bool,
    ) -> tuple[TaskResult[_P, _R], str]:
        """Return one call's result (its id set) and payload, checked; nothing is written.

        The id is ``request_id`` if ``given`` (checked), else the task's: derived from the
        arguments for a unique task, otherwise a new one.
        """
        result: TaskResult[_P, _R] | None = None
        if plain_call(args, kwargs):  # what normalize_json would hand back unchanged
            call_args, call_kwargs = list(args), dict(kwargs)
        else:  # Django's TaskResult normalizes them (and refuses what JSON cannot hold)
            result = cast(
                "TaskResult[_P, _R]", new_result(task, "", list(args), dict(kwargs), self.alias)
            )
            call_args, call_kwargs = result.args, result.kwargs
        path, ledger = plan.path, plan.entry.ledger
        try:
            payload = plan.template.encode(call_args, call_kwargs)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"The arguments of {path} are not JSON: {exc}") from exc
        try:
            size = len(payload) if payload.isascii() else len(payload.encode("utf-8"))
        except UnicodeEncodeError as exc:
            raise InvalidTask(
                f"The arguments of {path} hold text that is not UTF-8: {exc}"
            ) from exc
        if size > ledger.max_payload_bytes:
            raise InvalidTask(
                f"The payload of {path} is {size:,} bytes, over the "
                f"MAX_PAYLOAD_BYTES ({ledger.max_payload_bytes:,}) of queue {ledger.queue!r}."
            )
        if given:
            checked = _checked_id(request_id)
        elif plan.unique:
            checked = unique_id(path, call_args, call_kwargs)
        else:
            checked = random_id()
        if result is None:
            ready = ready_result(task, checked, call_args, call_kwargs, self.alias)
            return cast("TaskResult[_P, _R]", ready), payload
        object.__setattr__(result, "id", checked)
        return result, payload

    def _delay(self, task: Task[..., Any], entry: QueueEntry) -> timedelta | int:
        """``run_after`` as a delay from the Redis server's now."""
        run_after: object = task.run_after
        if run_after is None:
            return 0
        if isinstance(run_after, timedelta):
            return max(run_after, timedelta(0))
        assert isinstance(run_after, datetime)
        if timezone.is_naive(run_after):  # only without USE_TZ: validate_task says so
            run_after = timezone.make_aware(run_after)
        due = instant_ms(run_after, "run_after")
        return timedelta(milliseconds=max(0, due - entry.ledger.server_time_ms()))

    def _answered(
        self,
        task: Task[_P, _R],
        entry: QueueEntry,
        results: list[TaskResult[_P, _R]],
        answers: list[Admission],
    ) -> list[TaskResult[_P, _R]]:
        failure: Exception | None = None
        repeats = [
            answer.request_id for answer in answers if answer.status is AdmissionStatus.DUPLICATE
        ]
        existing = (
            dict(zip(repeats, read_tasks([entry.ledger], repeats), strict=True)) if repeats else {}
        )
        out: list[TaskResult[_P, _R]] = []
        made: dict[object, Any] = {}  # a batch is admitted at one instant, due at one
        for result, answer in zip(results, answers, strict=True):
            status = answer.status
            if status is AdmissionStatus.ADMITTED:
                if answer.times is None:  # the reference path: read the record
                    record = answer.record
                    assert record is not None
                    self._admitted(task, result, record.created_at, record.due_at, made)
                else:
                    self._admitted(task, result, *answer.times, made=made)
                out.append(result)
            elif status is AdmissionStatus.DUPLICATE:
                state = existing.get(answer.request_id)
                if state is None:  # purged between the admission and the read
                    failure = failure or TaskIdConflict(answer.request_id, entry.ledger.queue)
                    continue
                out.append(cast("TaskResult[_P, _R]", self._result_of(state)))
            elif status is AdmissionStatus.CONFLICT:
                failure = failure or TaskIdConflict(
                    answer.request_id, entry.ledger.queue, answer.reason
                )
            elif status is AdmissionStatus.FULL:
                failure = failure or QueueFull(
                    f"Queue {entry.ledger.queue!r} holds its MAX_RECORDS "
                    f"({entry.ledger.max_records:,}) live tasks: {answer.request_id!r} "
                    "was not enqueued."
                )
            else:
                failure = failure or InvalidTask(
                    f"{answer.request_id!r} was refused by queue {entry.ledger.queue!r}: "
                    f"{answer.reason}."
                )
        if failure is not None:
            raise failure
        return out

    def _admitted(
        self,
        task: Task[_P, _R],
        result: TaskResult[_P, _R],
        created_at: int,
        due_at: int,
        made: dict[object, Any],
    ) -> None:
        """Give an admitted result its ``enqueued_at`` (and ``run_after``); send the signal.

        ``made``: the datetimes and deferred tasks already made for this batch, reused.
        """
        enqueued_at = made.get(created_at)
        if enqueued_at is None:
            enqueued_at = made[created_at] = instant(created_at)
        object.__setattr__(result, "enqueued_at", enqueued_at)
        if due_at > created_at:
            later = made.get(("task", due_at))
            if later is None:
                later = made[("task", due_at)] = replace(task, run_after=instant(due_at))
            object.__setattr__(result, "task", later)
        task_enqueued.send(type(self), task_result=result)

    async def aenqueue(
        self, task: Task[_P, _R], args: list[Any], kwargs: dict[str, Any]
    ) -> TaskResult[_P, _R]:
        """``enqueue`` on a worker thread: the event loop never waits on Redis."""
        return await sync_to_async(self.enqueue, thread_sensitive=False)(task, args, kwargs)

    async def aenqueue_once(
        self, task: Task[_P, _R], request_id: str, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> TaskResult[_P, _R]:
        return await sync_to_async(self.enqueue_once, thread_sensitive=False)(
            task, request_id, args, kwargs
        )

    async def aenqueue_many(
        self, task: Task[_P, _R], calls: Iterable[Call], ids: Sequence[str] | None = None
    ) -> list[TaskResult[_P, _R]]:
        return await sync_to_async(self.enqueue_many, thread_sensitive=False)(
            task, list(calls), ids
        )

    # -- results ----------------------------------------------------------------------

    def lookup_queues(self) -> list[str]:
        """The queues ``get_result`` reads: ``QUEUES`` in order, or all of ``LEDGER``'s."""
        names = self.queue_order or queues.names()
        return [name for name in names if queues.known(name)]

    def task_state(self, result_id: str) -> TaskState:
        """Return the ledger's view of task ``result_id``, or raise ``TaskResultDoesNotExist``."""
        if not isinstance(result_id, str) or id_problem(result_id) is not None:
            raise TaskResultDoesNotExist(result_id)
        ledgers = [queues.get(name).ledger for name in self.lookup_queues()]
        state = read_tasks(ledgers, [result_id])[0]
        if state is None:
            raise TaskResultDoesNotExist(result_id)
        return state

    def _result_of(self, state: TaskState) -> TaskResult[..., Any]:
        return task_result(state, task_of(state, self.alias), self.alias)

    def get_result(self, result_id: str) -> TaskResult[..., Any]:
        """Read a task's result from any process; ``TaskResultDoesNotExist`` if unknown."""
        return self._result_of(self.task_state(result_id))

    async def aget_result(self, result_id: str) -> TaskResult[..., Any]:
        """``get_result`` on a worker thread: the event loop never waits on Redis."""
        return await sync_to_async(self.get_result, thread_sensitive=False)(result_id)


def _payload_options(task: Task[..., Any], declared: Task[..., Any]) -> dict[str, Any] | None:
    """The options a payload must carry: those of a task changed from its declaration."""
    if task is declared or not isinstance(task, LedgerTask):
        return None
    options = task.ledger_options
    base = declared.ledger_options if isinstance(declared, LedgerTask) else {}
    return options if options != base else None


def _checked_id(request_id: object) -> str:
    if not isinstance(request_id, str):
        raise TypeError(f"a task id must be a str, not {type(request_id).__name__}")
    problem = id_problem(request_id)
    if problem is not None:
        raise ValueError(f"task id {request_id!r} is not usable ({problem})")
    return request_id
