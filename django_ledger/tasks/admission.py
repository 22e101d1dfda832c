"""An enqueue's admissions: tried again while Redis is away, answered as ``TaskResult``s.

An admitted call gets its ``enqueued_at`` (and a deferred one its ``run_after``) and
sends ``task_enqueued``; a duplicate answers the stored task's result; a conflict, a
full queue or a refusal raises, after the whole batch was answered.

The ids are made before the admission, and admission by id is idempotent, so an
admission that met Redis away (``LedgerUnavailable``: it may or may not have been
applied) is tried again with the same ids and payloads, ``ADMISSION_TRIES`` in all,
unless the client retries on its own beyond the ledger's one quick retry (a cache
alias's ``Retry`` with more sends: then its policy has run out already). A try after one that was applied answers ``DUPLICATE``
for the call's own record: with ids the enqueue made, that answers as admitted.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, ParamSpec, TypeVar, cast

from ..connections import CLUSTER_RETRIES
from ..core.errors import LedgerUnavailable, NotReplicated
from ..core.results import Admission, AdmissionStatus
from ..core.sharded import AnyLedger
from ..queues import QueueEntry
from .compat import InvalidTask, Task, TaskResult, task_enqueued
from .exceptions import EnqueueOutcomeUnknown, QueueFull, TaskIdConflict
from .heard import heard
from .results import instant, task_of, task_result
from .store import read_tasks

__all__ = ["ADMISSION_BACKOFF", "ADMISSION_TRIES", "admitted", "answered", "retried"]

logger = logging.getLogger("django_ledger.tasks")

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")
#: Tries of one admission, the first included, when the client retries at most once
#: itself (the clients ``LEDGER['CONNECTION']`` makes: ``connections.client_retry``).
ADMISSION_TRIES = 3
#: Seconds before the second try (jittered down to half), doubling for each later one.
ADMISSION_BACKOFF = 0.1


def retried(
    error: LedgerUnavailable,
    ledger: AnyLedger,
    path: str,
    ids: Sequence[str],
    admit: Callable[[], _T],
) -> _T:
    """Try ``admit`` again after its first try raised ``error``; raise when Redis stays away.

    Raise ``EnqueueOutcomeUnknown`` naming ``ids`` when no try answered, and
    ``NotReplicated`` as it is (the admission is on the master), with the ids noted.
    """
    tries = 1 if client_retries(ledger.redis) > CLUSTER_RETRIES else ADMISSION_TRIES
    for attempt in range(1, tries + 1):
        if isinstance(error, NotReplicated):
            error.add_note(f"enqueue of {path}: task id(s) {_shown(ids)}")
            raise error
        if attempt == tries:
            break
        wait = ADMISSION_BACKOFF * 2 ** (attempt - 1) * random.uniform(0.5, 1.0)
        logger.warning(
            "enqueue of %s (task id %s): Redis unavailable, try %d of %d (%s); "
            "trying again in %.2f s",
            path,
            _shown(ids),
            attempt,
            tries,
            error,
            wait,
        )
        time.sleep(wait)
        try:
            return admit()
        except LedgerUnavailable as exc:
            error = exc
    through = f"{tries} tries" if tries > 1 else "the client's own retries"
    raise EnqueueOutcomeUnknown(
        f"Redis stayed unavailable through {through} of enqueuing {len(ids)} call(s) of "
        f"{path} (task id {_shown(ids)}), so whether they were enqueued is unknown: "
        "enqueue each again under its id (enqueue_once, or enqueue_many(..., "
        f"ids=error.task_ids)), which admits it at most once. Last error: {error}",
        ids,
    ) from error


def client_retries(client: Any) -> int:
    """How many times redis-py's ``Retry`` of ``client`` sends a failed call again."""
    get_retry = getattr(client, "get_retry", None)
    policy = get_retry() if callable(get_retry) else None
    if policy is None:
        return 0
    get_retries = getattr(policy, "get_retries", None)  # redis-py's public reader
    return int(get_retries()) if callable(get_retries) else 0


def _shown(ids: Sequence[str]) -> str:
    return ", ".join(repr(i) for i in ids[:3]) + (
        f" and {len(ids) - 3} more" if len(ids) > 3 else ""
    )


def answered(
    sender: type,
    alias: str,
    task: Task[_P, _R],
    entry: QueueEntry,
    results: list[TaskResult[_P, _R]],
    answers: list[Admission],
    *,
    own: bool = False,
) -> list[TaskResult[_P, _R]]:
    """Return the results of ``answers`` (one per call), or raise the first refusal.

    ``own``: a duplicate is this call's own admission, applied by a try whose answer
    was lost (the ids are ones the enqueue made): it answers as admitted.
    """
    failure: Exception | None = None
    repeats = [
        answer.request_id
        for answer in answers
        if answer.status is AdmissionStatus.DUPLICATE and not (own and answer.record is not None)
    ]
    existing = (
        dict(zip(repeats, read_tasks([entry.ledger], repeats), strict=True)) if repeats else {}
    )
    out: list[TaskResult[_P, _R]] = []
    made: dict[object, Any] = {}  # a batch is admitted at one instant, due at one
    for result, answer in zip(results, answers, strict=True):
        status = answer.status
        mine = status is AdmissionStatus.DUPLICATE and own and answer.record is not None
        if status is AdmissionStatus.ADMITTED or mine:
            times = answer.times
            if times is None:  # the reference path, or this call's own duplicate
                assert answer.record is not None
                times = (answer.record.created_at, answer.record.due_at)
            admitted(sender, task, result, *times, made=made)
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
    elif task.run_after is not None:
        # Due at once (a run_after already past): read back as get_result reads it.
        now = made.get(("now", id(task)))
        if now is None:
            now = made[("now", id(task))] = replace(task, run_after=None)
        object.__setattr__(result, "task", now)
    if enqueued_heard():
        task_enqueued.send(sender, task_result=result)


def enqueued_heard() -> bool:
    """Whether sending ``task_enqueued`` now would do anything (``heard.heard``).

    Not when nothing is connected, nor when the one receiver is Django's own
    (``log_task_enqueued``, which logs at DEBUG) and no handler would write its line.
    Any other receiver hears every enqueue.
    """
    return heard(task_enqueued, "task_enqueued", logging.DEBUG)
