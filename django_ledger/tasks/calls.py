"""Enqueues Django's API has no word for: once by an id of yours, and many in one call."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, ParamSpec, TypeVar

from .backend import Call, LedgerBackend
from .compat import Task, TaskResult
from .stand_ins import enqueue_many_on, enqueue_once_on, refusal, stand_in

__all__ = ["aenqueue_many", "aenqueue_once", "enqueue_many", "enqueue_once"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _backend(task: Task[..., Any], *, workflow: bool = False) -> LedgerBackend:
    backend = task.get_backend()
    if not isinstance(backend, LedgerBackend):
        raise refusal(task, backend, workflow=workflow)
    return backend


def enqueue_once(
    task: Task[_P, _R], request_id: str, /, *args: _P.args, **kwargs: _P.kwargs
) -> TaskResult[_P, _R]:
    """Enqueue ``task(*args, **kwargs)`` under ``request_id``, once.

    A repeat with the same task and arguments answers the existing ``TaskResult``
    (whatever its status) for as long as the queue keeps the record (its
    ``RETENTION``); a repeat with anything else raises ``TaskIdConflict`` naming the id.
    Under ``DummyBackend`` and ``ImmediateBackend`` (tests): ``stand_ins.py``.
    """
    backend = task.get_backend()
    if stand_in(backend):
        return enqueue_once_on(backend, task, request_id, args, kwargs)
    return _backend(task).enqueue_once(task, request_id, args, kwargs)


async def aenqueue_once(
    task: Task[_P, _R], request_id: str, /, *args: _P.args, **kwargs: _P.kwargs
) -> TaskResult[_P, _R]:
    """``enqueue_once`` without blocking the event loop."""
    backend = task.get_backend()
    if stand_in(backend):  # in memory: nothing to wait for
        return enqueue_once_on(backend, task, request_id, args, kwargs)
    return await _backend(task).aenqueue_once(task, request_id, args, kwargs)


def enqueue_many(
    task: Task[_P, _R], calls: Iterable[Call], *, ids: Sequence[str] | None = None
) -> list[TaskResult[_P, _R]]:
    """Enqueue many calls of ``task``, ``(args, kwargs)`` each, 128 per Redis round trip.

    ``ids`` (one per call) makes each an ``enqueue_once``; a unique task derives them.
    Under ``DummyBackend`` and ``ImmediateBackend`` (tests), a loop: ``stand_ins.py``.
    """
    backend = task.get_backend()
    if stand_in(backend):
        return enqueue_many_on(backend, task, calls, ids)
    return _backend(task).enqueue_many(task, calls, ids)


async def aenqueue_many(
    task: Task[_P, _R], calls: Iterable[Call], *, ids: Sequence[str] | None = None
) -> list[TaskResult[_P, _R]]:
    """``enqueue_many`` without blocking the event loop."""
    backend = task.get_backend()
    if stand_in(backend):
        return enqueue_many_on(backend, task, calls, ids)
    return await _backend(task).aenqueue_many(task, calls, ids)
