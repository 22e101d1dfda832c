"""What an enqueue checks before it writes: a task's plan, and each call's request.

A plan is what every call of one task shares (its queue, its id rule, its payload
template); a request is one call's id and payload, checked against the queue's limits.
Nothing here writes to Redis.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ParamSpec, TypeVar, cast

from django.utils import timezone

from ..core.jobs import PayloadTemplate, argument_problem
from ..core.records import id_problem
from ..core.timing import instant_ms
from ..queues import QueueEntry
from .compat import InvalidTask, Task, TaskResult
from .held import Held
from .ledger_task import LedgerTask
from .options import TaskOptions, TaskRefused, check_queue, resolve_options, tighten
from .resolve import random_id, unique_id
from .results import new_result, plain_call, ready_result

__all__ = [
    "Call",
    "Plan",
    "check_bounds",
    "checked_id",
    "delay",
    "payload_options",
    "request",
    "task_limits",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")
#: One call of a task: positional and keyword arguments.
Call = tuple[Sequence[Any], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Plan:
    """What every call of one task shares: its queue, its id rule, its payload template."""

    entry: QueueEntry
    path: str
    unique: bool | str | float
    template: PayloadTemplate
    #: A unique call held until its start, its end or for a period, or debounced
    #: (``held.py``); ``None``: the ordinary admission.
    held: Held | None = None


def request(
    plan: Plan,
    task: Task[_P, _R],
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    request_id: object,
    alias: str,
    *,
    given: bool,
) -> tuple[TaskResult[_P, _R], str]:
    """Return one call's result (its id set) and payload, checked; nothing is written.

    The id is ``request_id`` if ``given`` (checked), else the task's: derived from the
    arguments for a unique task, otherwise a new one.
    """
    result: TaskResult[_P, _R] | None = None
    path, ledger = plan.path, plan.entry.ledger
    if plain_call(args, kwargs):  # what normalize_json would hand back unchanged
        call_args, call_kwargs = list(args), dict(kwargs)
    else:  # Django's TaskResult normalizes them (and refuses what JSON cannot hold)
        try:
            made = new_result(task, "", list(args), dict(kwargs), alias)
        except (TypeError, ValueError, RecursionError) as exc:
            # normalize_json recurses: a cycle or deep nesting is a RecursionError there.
            problem = argument_problem(args, kwargs, loose=True)
            if problem is None:
                raise _refused(path, exc) from exc
            if not isinstance(exc, RecursionError):  # Django's own words too
                problem = type(problem)(f"{problem} ({exc})")
            raise _refused(path, problem) from exc
        result = cast("TaskResult[_P, _R]", made)
        call_args, call_kwargs = result.args, result.kwargs
    try:
        payload = plan.template.encode(call_args, call_kwargs)
    except (TypeError, ValueError) as exc:
        raise _refused(path, exc) from exc
    try:
        size = len(payload) if payload.isascii() else len(payload.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidTask(f"The arguments of {path} hold text that is not UTF-8: {exc}") from exc
    if size > ledger.max_payload_bytes:
        raise InvalidTask(
            f"The payload of {path} is {size:,} bytes, over the "
            f"MAX_PAYLOAD_BYTES ({ledger.max_payload_bytes:,}) of queue {ledger.queue!r}."
        )
    if given:
        checked = checked_id(request_id)
    elif plan.unique is True:  # the call's own id (other modes: a new record each time)
        checked = unique_id(path, call_args, call_kwargs)
    else:
        checked = random_id()
    if result is None:
        ready = ready_result(task, checked, call_args, call_kwargs, alias)
        return cast("TaskResult[_P, _R]", ready), payload
    object.__setattr__(result, "id", checked)
    return result, payload


def _refused(path: str, problem: BaseException) -> TypeError | ValueError:
    """The error of arguments no payload can hold: ``TypeError``, else ``ValueError``."""
    kind = TypeError if isinstance(problem, TypeError) else ValueError
    return kind(f"The arguments of {path} cannot be enqueued: {problem}")


def delay(task: Task[..., Any], entry: QueueEntry) -> timedelta | int:
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


def payload_options(task: Task[..., Any], declared: Task[..., Any]) -> dict[str, Any] | None:
    """The options a payload must carry: those of a task changed from its declaration."""
    if task is declared or not isinstance(task, LedgerTask):
        return None
    options = task.ledger_options
    base = declared.ledger_options if isinstance(declared, LedgerTask) else {}
    return options if options != base else None


def checked_id(request_id: object) -> str:
    """Return ``request_id`` if it is a usable task id; else raise saying why not."""
    if not isinstance(request_id, str):
        raise TypeError(f"a task id must be a str, not {type(request_id).__name__}")
    problem = id_problem(request_id)
    if problem is not None:
        raise ValueError(f"task id {request_id!r} is not usable ({problem})")
    return request_id


def check_bounds(
    declared: Task[..., Any], queue: str, entry: QueueEntry, options: dict[str, Any] | None
) -> None:
    """Refuse at enqueue what a worker would refuse at run time (``TaskHandler.plan``).

    A queue the task is not declared for, or options that loosen the task's and the
    queue's limits: ``InvalidTask`` now rather than a ``TaskRefused`` failure later.
    """
    try:
        check_queue(declared, queue)
        if options:
            tighten(task_limits(declared, queue, entry), options)
    except TaskRefused as exc:
        raise InvalidTask(
            f"{declared.module_path} cannot be enqueued into {queue!r}: {exc}"
        ) from exc


def task_limits(task: Task[..., Any], queue: str, entry: QueueEntry) -> TaskOptions:
    """The options ``task`` runs with on ``queue``, before a call's own tighten them."""
    check_queue(task, queue)
    declared = task.ledger_options if isinstance(task, LedgerTask) else {}
    return resolve_options(
        declared, entry.options, max_attempts=entry.max_attempts, lease=entry.lease
    )
