"""``LedgerBackend``: Django's task backend on the delivery ledger.

``TASKS = {"default": {"BACKEND": "django_ledger.tasks.LedgerBackend", "QUEUES":
["default"], "OPTIONS": {}}}``. An enqueue is one admission (one script call): the task
becomes a record of the queue named by its ``queue_name``, its ``TaskResult.id`` the
record's request id; ``run_after`` becomes the record's due time on the Redis clock and
``priority`` its priority. ``manage.py ledger_worker`` runs what is due
(``handler.TaskHandler``); ``get_result`` reads record and result from any process.
A call's checks before the write live in ``plans.py``, the admission's answers in
``admission.py``. Inside ``transaction.atomic()`` on the ``DATABASE`` option's alias,
an enqueue writes outbox rows in the caller's transaction instead (``TRANSACTIONS``:
``django_ledger/outbox/``, ``docs/transactions.md``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from functools import cached_property
from types import SimpleNamespace
from typing import Any, ParamSpec, TypeVar, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone
from django.utils.module_loading import import_string

from ..core.errors import LedgerUnavailable
from ..core.jobs import PayloadTemplate
from ..core.records import id_problem
from ..core.results import Admission
from ..core.timing import duration_ms
from ..core.worker.tracing import current_traceparent
from ..outbox.options import (
    TRANSACTION_OPTION_DEFAULTS,
    TransactionOptions,
    transaction_options,
)
from ..outbox.staging import in_transaction
from ..outbox.tables import outbox_ready
from ..queues import QueueEntry, queues
from .admission import admitted, answered, retried
from .compat import (
    DEFAULT_TASK_QUEUE_NAME,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
)
from .held import enqueue_held, held_of, not_staged
from .ledger_task import LedgerTask
from .options import BACKEND_OPTION_DEFAULTS, backend_option_problem, normalize_option
from .plans import Call, Plan, check_bounds, delay, payload_options, request
from .resolve import declared_task
from .results import task_of, task_result
from .staged import readable_staged_result, stage_task
from .state import TaskState
from .store import read_tasks

__all__ = ["Call", "LedgerBackend"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")
#: Plans kept per backend (declared tasks: module-level, so few); past it, all are dropped.
_MAX_PLANS = 4096


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
        #: Task shapes Django's checks passed (this backend's ``supports_*`` never change).
        self._validated: dict[tuple[Any, ...], None] = {}
        #: Declared tasks' plans by ``id(task)``, each with its task (ids are reused).
        self._plans: dict[int, tuple[Task[..., Any], Plan]] = {}

    # -- options ----------------------------------------------------------------------

    @property
    def max_result_bytes(self) -> int:
        """``OPTIONS['MAX_RESULT_BYTES']``: the most a task's JSON return value may take."""
        for name, value in self.options.items():
            if name in TRANSACTION_OPTION_DEFAULTS:
                continue
            problem = backend_option_problem(name, value)
            if problem is not None:
                raise ImproperlyConfigured(f"TASKS[{self.alias!r}]['OPTIONS']: {problem}")
        limit: int = self.options.get(
            "MAX_RESULT_BYTES", BACKEND_OPTION_DEFAULTS["MAX_RESULT_BYTES"]
        )
        return limit

    @cached_property
    def transactions(self) -> TransactionOptions:
        """``OPTIONS['TRANSACTIONS']``, ``['DATABASE']``, ``['OUTBOX_MAX_AGE']``, checked."""
        try:
            return transaction_options(self.options)
        except ValueError as exc:
            raise ImproperlyConfigured(f"TASKS[{self.alias!r}]['OPTIONS']: {exc}") from exc

    @property
    def eager(self) -> bool:
        """``OPTIONS['EAGER']``: each enqueue runs what it admitted at once (tests only)."""
        self.max_result_bytes  # noqa: B018 (checks every option: a bad EAGER raises)
        return bool(self.options.get("EAGER", False))

    def ran_eagerly(self, results: _T) -> _T:
        """With ``EAGER``, run what is due now (at the commit, if staged): ``tasks/inline.py``."""
        if self.eager:  # bound by path: the handler that runs the tasks reads this backend
            run_eagerly_after = import_string("django_ledger.tasks.inline.run_eagerly_after")
            run_eagerly_after(self, results if isinstance(results, list) else [results])
        return results

    def staging(self) -> bool:
        """Whether an enqueue now joins the caller's transaction (outbox or on_commit).

        ``outbox`` on a database without the table (not migrated) admits at once, with
        one warning per process (``outbox/tables.py``).
        """
        options = self.transactions
        if options.mode == "immediate" or not in_transaction(options.database):
            return False
        return options.mode == "on_commit" or outbox_ready(options.database)

    def check(self, **kwargs: Any) -> list[Any]:
        """This backend's system checks: its queues and options (``backend_checks.py``)."""
        from .backend_checks import check_backend

        return check_backend(self.alias, {"QUEUES": self.queue_order, "OPTIONS": self.options})

    # -- validation -------------------------------------------------------------------

    def validate_task(self, task: Task[..., Any]) -> None:
        """Django's checks (once per task shape), and ``run_after`` as a timedelta too."""
        key = (task.func, task.priority, task.queue_name, task.takes_context)
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
        """Admit one call of ``task``; a unique task's repeat answers the existing result.

        With Redis away, the admission is tried again under the same id
        (``admission.py``); ``EnqueueOutcomeUnknown`` says it stayed away, with the id.
        """
        return self.enqueue_many(task, [(args, kwargs)])[0]

    def enqueue_once(
        self, task: Task[_P, _R], request_id: str, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> TaskResult[_P, _R]:
        """Admit one call under ``request_id``, once: a repeat answers the existing result."""
        return self.enqueue_many(task, [(args, kwargs)], [request_id])[0]

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
        those after it in the same batch) were admitted. One call is one admission
        (``Ledger.admit``); a held or debounced call (its id not given) is one script call
        each. With Redis away, the admission is tried again under the same ids
        (``admission.py``); ``EnqueueOutcomeUnknown`` says it stayed away, with the ids.
        """
        given = ids is not None
        plan = self._plan(task)
        calls = list(calls)
        if ids is not None and len(ids) != len(calls):
            raise ValueError(f"enqueue_many got {len(ids)} ids for {len(calls)} calls")
        results: list[TaskResult[_P, _R]] = []
        requests: list[tuple[str, str]] = []
        for position, (args, kwargs) in enumerate(calls):
            result, payload = request(
                plan,
                task,
                args,
                kwargs,
                None if ids is None else ids[position],
                self.alias,
                given=given,
            )
            results.append(result)
            requests.append((result.id, payload))
        if not requests:
            return []
        trace = current_traceparent()  # the run's span continues the enqueuer's trace
        entry = plan.entry
        if plan.held is not None and not given:
            if self.staging():
                raise not_staged(plan.path)
            held = [
                enqueue_held(
                    type(self),
                    self.alias,
                    task,
                    entry,
                    plan.held,
                    result,
                    payload,
                    duration_ms(delay(task, entry), "run_after"),
                    trace,
                )
                for result, (_, payload) in zip(results, requests, strict=True)
            ]
            return self.ran_eagerly(held)
        if self.staging():
            stage_task(self.transactions, self.alias, task, entry.ledger.queue, requests, trace)
            now = timezone.now()
            for result in results:
                object.__setattr__(result, "enqueued_at", now)
            return self.ran_eagerly(results)
        ledger = entry.ledger

        def admit() -> list[Admission]:
            if len(requests) == 1:
                request_id, payload = requests[0]
                return [ledger.admit(request_id, payload, delay(task, entry), trace, task.priority)]
            return ledger.admit_many(requests, delay(task, entry), trace, task.priority)

        own = False
        try:
            answers = admit()
        except LedgerUnavailable as exc:  # any prefix applied: try all again under their ids
            answers = retried(exc, ledger, plan.path, [id_ for id_, _ in requests], admit)
            own = not given and not plan.unique  # a duplicate is this enqueue's own
        else:
            if len(answers) == 1 and answers[0].times is not None:  # the common answer
                admitted(type(self), task, results[0], *answers[0].times, made={})
                return self.ran_eagerly(results)
        return self.ran_eagerly(
            answered(type(self), self.alias, task, entry, results, answers, own=own)
        )

    def _plan(self, task: Task[..., Any]) -> Plan:
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
            unique = normalize_option("unique", entry.options.get("unique", False))
        path = task.module_path
        options = payload_options(task, declared)
        check_bounds(declared, task.queue_name, entry, options)
        held = held_of(
            path, unique, getattr(task, "debounce", None), getattr(task, "debounce_max", None)
        )
        plan = Plan(entry, path, unique, PayloadTemplate(path, options), held)
        if task is declared:
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            self._plans[id(task)] = (task, plan)
        return plan

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

    def get_result(self, result_id: str) -> TaskResult[..., Any]:
        """Read a task's result from any process; ``TaskResultDoesNotExist`` if unknown.

        A task still waiting in the outbox (its transaction committed, or is this
        thread's own and open) answers READY, also while Redis is away. Where the
        database cannot be read (an event loop, a ``SimpleTestCase``, the database
        down), Redis alone answers.
        """
        try:
            state = self.task_state(result_id)
        except (TaskResultDoesNotExist, LedgerUnavailable):
            # Not in Redis (or Redis away): a row in the outbox is a task not admitted yet.
            # Only the outbox mode stages, and only on a database that has the table.
            readable, staged = False, None
            if self.transactions.mode == "outbox" and isinstance(result_id, str):
                readable, staged = readable_staged_result(
                    self.transactions.database, self.alias, result_id
                )
            if not readable:
                raise
            if staged is not None:
                return staged
            # Delivered between the two reads (the courier or a relay admits, then
            # deletes): Redis has it now, unless it never existed.
            state = self.task_state(result_id)
        return task_result(state, task_of(state, self.alias), self.alias)

    async def aget_result(self, result_id: str) -> TaskResult[..., Any]:
        """``get_result`` on a worker thread: the event loop never waits on Redis."""
        return await sync_to_async(self.get_result, thread_sensitive=False)(result_id)
