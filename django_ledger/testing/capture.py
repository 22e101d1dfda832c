"""What was enqueued: ``captured_tasks()`` for a block, ``assert_enqueued`` for the ledger.

``captured_tasks`` listens to Django's ``task_enqueued`` signal, which the backend sends
once a call is admitted (an outbox row or an on-commit enqueue: once delivered), so a
repeat of a unique task or of ``enqueue_once`` is not captured twice. ``assert_enqueued``
reads the tasks waiting in the ledger (pending, due or deferred), decoded from their
payloads, so it sees what a worker would run, whoever enqueued it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..core.jobs import BadPayload, decode_task
from ..core.records import State
from ..queues import queues as ledger_queues
from ..tasks.compat import Task, TaskResult, task_enqueued
from .running import task_queues

__all__ = ["Enqueued", "assert_enqueued", "captured_tasks", "enqueued_tasks", "refute_enqueued"]

#: Stands for "any": an argument of ``assert_enqueued`` that was not given.
_ANY: Any = object()


@dataclass(frozen=True)
class Enqueued:
    """One call waiting in the ledger: its id, queue, task path and arguments."""

    id: str
    queue: str
    task: str
    args: list[Any]
    kwargs: dict[str, Any]


@contextmanager
def captured_tasks() -> Iterator[list[TaskResult[..., Any]]]:
    """Collect the ``TaskResult`` of each call admitted inside the block, in order."""
    seen: list[TaskResult[..., Any]] = []
    lock = threading.Lock()  # enqueues from other threads are captured too

    def heard(sender: Any, task_result: TaskResult[..., Any], **kwargs: Any) -> None:
        with lock:
            seen.append(task_result)

    task_enqueued.connect(heard, weak=False)
    try:
        yield seen
    finally:
        task_enqueued.disconnect(heard)


def enqueued_tasks(queues: Iterable[str] | None = None) -> list[Enqueued]:
    """The calls waiting in ``queues`` (default: all of ``TASKS``'s), oldest due first."""
    if isinstance(queues, str):
        raise TypeError("queues must be a list of queue names, not one string")
    found: list[Enqueued] = []
    for name in task_queues() if queues is None else queues:
        ledger = ledger_queues.get(name).ledger
        for shard in ledger.shards:
            ids = [raw.decode() for raw in shard.redis.zrange(shard.ready_key, 0, -1)]
            for record in shard.resolve_many(ids):
                if record is None or record.state is not State.PENDING:
                    continue
                try:
                    call = decode_task(record.payload)
                except BadPayload:
                    continue  # not a task (a raw queue's job): nothing to match
                found.append(Enqueued(record.request_id, name, call.task, call.args, call.kwargs))
    return found


def _path(task: Task[..., Any] | str) -> str:
    if isinstance(task, str):
        return task
    path = getattr(task, "module_path", None)
    if not isinstance(path, str):
        raise TypeError(f"expected a task or its dotted path, not {type(task).__name__}")
    return path


def _wanted(path: str, args: Any, kwargs: Any, queue: str | None) -> str:
    parts = [path]
    if args is not _ANY:
        parts.append(f"args={list(args)!r}")
    if kwargs is not _ANY:
        parts.append(f"kwargs={dict(kwargs)!r}")
    if queue is not None:
        parts.append(f"queue={queue!r}")
    return " ".join(parts)


def assert_enqueued(
    task: Task[..., Any] | str,
    *,
    args: Sequence[Any] = _ANY,
    kwargs: dict[str, Any] = _ANY,
    queue: str | None = None,
    count: int | None = None,
) -> list[Enqueued]:
    """Assert that calls of ``task`` wait in the ledger; return them.

    ``args`` and ``kwargs`` must equal the call's (as JSON gives them back: tuples are
    lists); left out, any arguments match. ``count`` asks for exactly that many calls,
    else at least one. The message lists what does wait, to show the difference.
    """
    if count is not None and count < 0:
        raise ValueError(f"count must be 0 or more, got {count}")
    path = _path(task)
    waiting = enqueued_tasks(None if queue is None else [queue])
    found = [
        call
        for call in waiting
        if call.task == path
        and (args is _ANY or call.args == list(args))
        and (kwargs is _ANY or call.kwargs == dict(kwargs))
    ]
    if (count is None and found) or (count is not None and len(found) == count):
        return found
    expected = "at least one call" if count is None else f"{count} call(s)"
    listed = "\n".join(
        f"  {call.task} args={call.args!r} kwargs={call.kwargs!r} queue={call.queue!r}"
        for call in waiting[:20]
    )
    raise AssertionError(
        f"expected {expected} of {_wanted(path, args, kwargs, queue)} waiting, found "
        f"{len(found)}; waiting: {len(waiting)}" + (f"\n{listed}" if listed else "")
    )


def refute_enqueued(
    task: Task[..., Any] | str,
    *,
    args: Sequence[Any] = _ANY,
    kwargs: dict[str, Any] = _ANY,
    queue: str | None = None,
) -> None:
    """Assert that no call of ``task`` (with these arguments, on ``queue``) waits."""
    assert_enqueued(task, args=args, kwargs=kwargs, queue=queue, count=0)
