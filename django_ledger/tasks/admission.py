"""The ledger's answers to an enqueue's admissions, as Django's ``TaskResult``s.

An admitted call gets its ``enqueued_at`` (and a deferred one its ``run_after``) and
sends ``task_enqueued``; a duplicate answers the stored task's result; a conflict, a
full queue or a refusal raises, after the whole batch was answered.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypeVar, cast

from typing_extensions import ParamSpec

from ..core.results import Admission, AdmissionStatus
from .compat import InvalidTask, Task, TaskResult, task_enqueued
from .exceptions import QueueFull, TaskIdConflict
from .results import instant, task_of, task_result
from .store import QueueEntry, read_tasks

__all__ = ["admitted", "answered"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def answered(
    sender: type,
    alias: str,
    task: Task[_P, _R],
    entry: QueueEntry,
    results: list[TaskResult[_P, _R]],
    answers: list[Admission],
) -> list[TaskResult[_P, _R]]:
    """Return the results of ``answers`` (one per call), or raise the first refusal."""
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
                admitted(sender, task, result, record.created_at, record.due_at, made)
            else:
                admitted(sender, task, result, *answer.times, made=made)
            out.append(result)
        elif status is AdmissionStatus.DUPLICATE:
            state = existing.get(answer.request_id)
            if state is None:  # purged between the admission and the read
                failure = failure or TaskIdConflict(answer.request_id, entry.ledger.queue)
                continue
            out.append(cast("TaskResult[_P, _R]", task_result(state, task_of(state, alias), alias)))
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


def admitted(
    sender: type,
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
    task_enqueued.send(sender, task_result=result)
