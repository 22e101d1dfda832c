"""The ledger's own entry points under Django's ``DummyBackend`` and ``ImmediateBackend``.

Tests often swap the ledger for one of Django's two in-memory backends. There,
``enqueue_once`` and ``enqueue_many`` work: a repeat of an id answers the first
``TaskResult`` and other arguments under it raise ``TaskIdConflict`` (ids remembered by
the backend object, so for the process and its ``TASKS`` setting; ``DummyBackend.clear()``
forgets them), and ``enqueue_many`` is a loop of enqueues. The ids are the backend's own:
``enqueue_once``'s id is a key, not the result's id. Workflows are refused in one
sentence: their steps are released by the ledger. Any other backend is refused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from importlib import import_module
from typing import Any, ParamSpec, TypeVar

from .compat import BaseTaskBackend, InvalidTask, Task, TaskResult, normalize_json
from .exceptions import TaskIdConflict

__all__ = ["enqueue_many_on", "enqueue_once_on", "refusal", "stand_in"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_lock = threading.Lock()


def _classes() -> tuple[type[Any], type[Any]]:
    package = BaseTaskBackend.__module__.rpartition(".")[0]  # django(_)tasks.backends
    dummy = import_module(f"{package}.dummy").DummyBackend
    immediate = import_module(f"{package}.immediate").ImmediateBackend
    return dummy, immediate


def stand_in(backend: object) -> bool:
    """Whether ``backend`` is Django's ``DummyBackend`` or ``ImmediateBackend`` (or a subclass)."""
    return isinstance(backend, _classes())


def refusal(task: Task[..., Any], backend: object, *, workflow: bool) -> InvalidTask:
    """The one sentence that refuses a call the ledger alone can make on ``backend``."""
    name = type(backend).__name__
    if workflow and stand_in(backend):
        why = (
            "DummyBackend never runs tasks"
            if isinstance(backend, _classes()[0])
            else "ImmediateBackend keeps no ledger"
        )
        return InvalidTask(
            f"Workflows need django_ledger.tasks.LedgerBackend: {why}, so a step could never "
            f"release its dependants (task backend {task.backend!r} is {name}); in tests, use "
            "LedgerBackend with OPTIONS['EAGER'] (see 'Testing')."
        )
    return InvalidTask(
        f"Task backend {task.backend!r} is {name}, not django_ledger.tasks.LedgerBackend: "
        "only the ledger (or, in tests, DummyBackend and ImmediateBackend) enqueues by id "
        "and in bulk."
    )


def enqueue_once_on(
    backend: Any,
    task: Task[_P, _R],
    request_id: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> TaskResult[_P, _R]:
    """``enqueue_once`` on a stand-in: the first result of ``request_id``, or a new enqueue."""
    if not isinstance(request_id, str) or not request_id:
        raise InvalidTask(f"a task id must be a non-empty string, not {request_id!r}")
    call = (task.module_path, normalize_json(list(args)), normalize_json(dict(kwargs)))
    with _lock:
        seen: dict[str, tuple[Any, TaskResult[_P, _R]]] = backend.__dict__.setdefault(
            "_ledger_enqueued_once", {}
        )
        found = seen.get(request_id)
        dummy = isinstance(backend, _classes()[0])
        if (
            found is not None
            and dummy
            and not any(kept.id == found[1].id for kept in backend.results)
        ):
            found = None  # DummyBackend.clear() dropped it
        if found is not None:
            if found[0] != call:
                raise TaskIdConflict(request_id, task.queue_name)
            return found[1]
        result = task.enqueue(*args, **kwargs)
        seen[request_id] = (call, result)
        return result


def enqueue_many_on(
    backend: Any,
    task: Task[_P, _R],
    calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]],
    ids: Sequence[str] | None,
) -> list[TaskResult[_P, _R]]:
    """``enqueue_many`` on a stand-in: one enqueue (or ``enqueue_once``) per call, in order."""
    calls = list(calls)
    if ids is not None and len(ids) != len(calls):
        raise ValueError(f"enqueue_many got {len(ids)} ids for {len(calls)} calls")
    if ids is None:
        return [task.enqueue(*args, **kwargs) for args, kwargs in calls]
    return [
        enqueue_once_on(backend, task, request_id, args, kwargs)
        for request_id, (args, kwargs) in zip(ids, calls, strict=True)
    ]
