"""Django's ``TaskResult`` from a task as the ledger holds it (``state.TaskState``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeAlias

from django.conf import settings
from django.utils import timezone

from ..core.jobs import payload_problem
from ..core.progress import Progress
from ..core.records import State, ms_to_datetime
from .compat import Task, TaskError, TaskResult, TaskResultDoesNotExist, TaskResultStatus
from .exceptions import UnknownTask
from .ledger_task import LedgerTask
from .options import normalize_option
from .resolve import resolve_task
from .state import TaskState

__all__ = [
    "LedgerTaskResult",
    "enqueued_as",
    "instant",
    "new_result",
    "plain_call",
    "ready_result",
    "task_of",
    "task_result",
    "usable_options",
]

if TYPE_CHECKING:
    _ResultBase: TypeAlias = TaskResult[..., Any]
else:
    _ResultBase = TaskResult

#: What ``refresh`` reads again: all but the call itself (Django's own list, and ours).
_REFRESHED = (
    {f.name for f in fields(TaskResult)} - {"task", "id", "args", "kwargs", "backend"}
) | {"progress", "metadata"}


@dataclass(frozen=True, slots=True, kw_only=True)
class LedgerTaskResult(_ResultBase):  # type: ignore[misc]
    """Django's ``TaskResult``, with what the task reported while it ran.

    ``progress``: the last ``context.set_progress`` (``done``, ``total``, ``note``,
    ``fraction``, ``percent``), ``None`` before any; ``metadata``: the task's metadata
    dict (``context.metadata``), empty before any.
    """

    progress: Progress | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def refresh(self) -> None:
        """Read the task again: its status, times, errors, progress and metadata."""
        self._take(self.task.get_backend().get_result(self.id))

    async def arefresh(self) -> None:
        self._take(await self.task.get_backend().aget_result(self.id))

    def _take(self, other: Any) -> None:
        for name in _REFRESHED:
            default: object = {} if name == "metadata" else None  # another backend's result
            object.__setattr__(self, name, getattr(other, name, default))


#: Classes ``normalize_json`` hands back as they are (exactly these: not subclasses).
_PLAIN = frozenset({str, int, float, bool, type(None)})


def plain_call(args: Any, kwargs: Any) -> bool:
    """Whether a call's arguments are plain JSON scalars: ``normalize_json`` leaves them be.

    Then ``list(args)`` and ``dict(kwargs)`` are what ``TaskResult`` would hold, and
    ``ready_result`` can skip normalizing them again.
    """
    plain = _PLAIN
    if args.__class__ not in (list, tuple) or kwargs.__class__ is not dict:
        return False
    for arg in args:  # loops, not all() over generators: a call's few arguments, once each
        if arg.__class__ not in plain:
            return False
    for key, value in kwargs.items():
        if key.__class__ is not str or value.__class__ not in plain:
            return False
    return True


#: The fields ``ready_result`` sets to ``None``. With the call's own, they are all of
#: ``TaskResult``'s in Django 6.0, 6.1 and the backport; should a later version add one,
#: ``TaskResult(...)`` builds every result.
_NONE_FIELDS = ("enqueued_at", "started_at", "finished_at", "last_attempted_at", "_return_value")
_CALL_FIELDS = ("task", "id", "status", "args", "kwargs", "backend", "errors", "worker_ids")
_FIELDS_KNOWN = {field.name for field in fields(TaskResult)} == {*_NONE_FIELDS, *_CALL_FIELDS}


def new_result(
    task: Task[..., Any], request_id: str, args: Any, kwargs: Any, alias: str
) -> TaskResult[..., Any]:
    """Django's READY ``TaskResult`` of one call, built by Django (it normalizes the
    arguments, and refuses what JSON cannot hold)."""
    return LedgerTaskResult(
        task=task,
        id=request_id,
        status=TaskResultStatus.READY,
        enqueued_at=None,
        started_at=None,
        finished_at=None,
        last_attempted_at=None,
        args=args,
        kwargs=kwargs,
        backend=alias,
        errors=[],
        worker_ids=[],
    )


def ready_result(
    task: Task[..., Any], request_id: str, args: list[Any], kwargs: dict[str, Any], alias: str
) -> TaskResult[..., Any]:
    """Django's READY ``TaskResult`` of a call whose arguments are ``plain_call``.

    Every field set as ``TaskResult(...)`` sets it, without running ``normalize_json``
    over arguments it would hand back unchanged (half of building one).
    """
    if not _FIELDS_KNOWN:
        return new_result(task, request_id, args, kwargs, alias)
    result: TaskResult[..., Any] = LedgerTaskResult.__new__(LedgerTaskResult)
    put = object.__setattr__  # the frozen dataclass's own __init__ sets fields so too
    for name in _NONE_FIELDS:
        put(result, name, None)
    put(result, "task", task)
    put(result, "id", request_id)
    put(result, "status", TaskResultStatus.READY)
    put(result, "args", args)
    put(result, "kwargs", kwargs)
    put(result, "backend", alias)
    put(result, "errors", [])
    put(result, "worker_ids", [])
    put(result, "progress", None)
    put(result, "metadata", {})
    return result


def instant(ms: int | None) -> datetime | None:
    """Return epoch milliseconds as Django shows instants (aware, or naive without USE_TZ)."""
    if not ms:
        return None
    moment = ms_to_datetime(ms)
    return moment if settings.USE_TZ else timezone.make_naive(moment)


def task_of(state: TaskState, alias: str) -> Task[..., Any]:
    """Return the task of ``state`` as it was enqueued: queue, priority and options.

    A stored option this version cannot use (``lease: -1``, from a payload admitted
    through the REST API) is left out: the task shows its declared value, and reading
    never fails on a record's options (the worker refuses to run such a payload).
    """
    if state.payload is None:
        raise TaskResultDoesNotExist(
            f"{state.request_id!r} on queue {state.queue!r} is a ledger record whose payload "
            f"is not a task document: {payload_problem(state.record.payload) or 'it changed'}"
        )
    try:
        declared = resolve_task(state.payload.task)
    except UnknownTask as exc:
        raise TaskResultDoesNotExist(
            f"{state.request_id!r} on queue {state.queue!r} names no task of this project: {exc}"
        ) from exc
    record = state.record
    return enqueued_as(
        declared,
        alias,
        state.queue,
        usable_options(state.payload.options),
        priority=getattr(record, "priority", 0),
        run_after=instant(record.due_at) if record.due_at > record.created_at else None,
    )


def enqueued_as(
    declared: Task[..., Any], alias: str, queue: str, options: Mapping[str, Any], **more: Any
) -> Task[..., Any]:
    """``declared`` as a call of it was enqueued: on ``queue`` and backend ``alias``, with
    a payload's ``options`` (a ``LedgerTask``'s) and ``more`` fields where they differ."""
    changes = {
        name: value
        for name, value in dict(more, queue_name=queue, backend=alias).items()
        if getattr(declared, name) != value
    }
    if isinstance(declared, LedgerTask):
        changes.update(options)
    return replace(declared, **changes) if changes else declared


def usable_options(options: dict[str, Any]) -> dict[str, Any]:
    """Return the payload ``options`` a task can take, leaving out those it cannot."""
    usable = {}
    for name, value in options.items():
        try:
            usable[name] = normalize_option(name, value)
        except (TypeError, ValueError):
            continue
    return usable


def task_result(state: TaskState, task: Task[..., Any], alias: str) -> TaskResult[..., Any]:
    """Build Django's ``TaskResult`` of ``state`` for ``task`` on backend ``alias``."""
    payload = state.payload
    progress = state.progress
    result: TaskResult[..., Any] = LedgerTaskResult(
        task=task,
        id=state.request_id,
        status=TaskResultStatus(state.status),
        enqueued_at=instant(state.enqueued_at),
        started_at=instant(state.started_at),
        finished_at=instant(state.finished_at),
        last_attempted_at=instant(state.last_attempted_at),
        args=list(payload.args) if payload else [],
        kwargs=dict(payload.kwargs) if payload else {},
        backend=alias,
        errors=[
            TaskError(
                exception_class_path=str(error.get("exception_class_path", "")),
                traceback=str(error.get("traceback", "")),
            )
            for error in state.errors
        ],
        worker_ids=list(state.worker_ids),
        progress=progress,
        metadata=dict(progress.metadata) if progress is not None else {},
    )
    if state.has_return_value and state.record.state is State.COMPLETED:
        object.__setattr__(result, "_return_value", state.return_value)
    return result
