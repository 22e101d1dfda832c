"""What the task backend raises, and what its results record, beyond Django's own."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

from ..core.errors import LedgerUnavailable
from ..core.timing import MAX_DURATION_MS
from .compat import InvalidTask, TaskException

__all__ = [
    "Cancelled",
    "EnqueueOutcomeUnknown",
    "LeaseExpired",
    "NotRun",
    "QueueFull",
    "ResultTooLarge",
    "RetryAfter",
    "TaskIdConflict",
    "UnknownTask",
]


#: Why an id is taken, by the admission's reason (any other: another call holds it).
_CONFLICT_WHY = {
    "quarantined": "it is quarantined (corrupt bytes an operator has not discarded)",
    "elsewhere": (
        "it waits in the outbox for another Redis or namespace (another deployment "
        "shares this database); enqueue it again once that one is delivered"
    ),
    "workflow_step": (
        "a workflow's step holds it while it waits for its parents (only its release runs it)"
    ),
}


class TaskIdConflict(TaskException):
    """An enqueue under an id the queue holds for another call (other task or arguments)."""

    def __init__(self, request_id: str, queue: str, reason: str | None = None) -> None:
        self.request_id = request_id
        self.queue = queue
        self.reason = reason
        why = _CONFLICT_WHY.get(
            reason or "", "it was enqueued with another task, other arguments or other options"
        )
        super().__init__(
            f"task id {request_id!r} is taken on queue {queue!r}: {why}; a repeat of an "
            "idempotent enqueue must pass the same task and arguments"
        )


class EnqueueOutcomeUnknown(LedgerUnavailable):
    """Redis stayed unavailable through every try of an enqueue's admission.

    Each task in ``task_ids`` (in call order) may or may not be enqueued. Enqueue it
    again under its id (``enqueue_once(task, task_id, ...)``, or ``enqueue_many(...,
    ids=error.task_ids)``) once Redis is back: it is admitted at most once.
    """

    def __init__(self, message: str, task_ids: Sequence[str]) -> None:
        super().__init__(message)
        self.task_ids = list(task_ids)


class QueueFull(TaskException):
    """The queue holds ``MAX_RECORDS`` live records: nothing was enqueued."""


class ResultTooLarge(ValueError):
    """A task returned a value whose JSON is over the backend's ``MAX_RESULT_BYTES``."""


class UnknownTask(InvalidTask):
    """A payload names something that is not a task the worker may run."""


class LeaseExpired(Exception):
    """Recorded for an attempt whose worker stopped (died, or lost its lease) unsettled.

    Never raised: it is the ``exception_class`` of the ``TaskError`` a result shows for
    such an attempt.
    """


class NotRun(Exception):
    """Recorded for an attempt a worker ended FAILED without running the task.

    Never raised: its payload named no task the worker could run, or did not decode (the
    worker's log line says which). It is the ``exception_class`` of that attempt's error.
    """


class Cancelled(BaseException):
    """A task cancelled (``django_ledger.tasks.cancel``): it ended FAILED and never runs again.

    The ``exception_class`` of the error a cancelled task's result shows (its traceback
    text names who cancelled it, when and why). A ``BaseException``, as ``TimedOut``, so
    that a task's ``except Exception`` does not swallow it where it is raised.
    """

    def __init__(
        self, message: str = "", *, by: str = "", at: int | None = None, reason: str = ""
    ) -> None:
        super().__init__(message)
        self.by, self.at, self.reason = by, at, reason


class RetryAfter(Exception):
    """Raised by a task: run the next attempt ``seconds`` from now (an upstream's ``Retry-After``).

    ``seconds``: a number of seconds (0 to about 100 years), a ``timedelta``, an aware
    ``datetime``, or the text of an HTTP ``Retry-After`` header (digits, or an HTTP date).
    The next attempt waits exactly that long, instead of the backoff, whatever the task's
    ``retry_on``; while attempts remain (``max_attempts``): on the last one the task ends
    FAILED with this error recorded. A value that is none of these raises ``TypeError``
    or ``ValueError`` here, which then is the attempt's error.
    """

    def __init__(self, seconds: float | timedelta | datetime | str, reason: str = "") -> None:
        self.seconds = retry_seconds(seconds)
        self.reason = reason
        text = f"retry after {self.seconds:g} s"
        super().__init__(f"{text}: {reason}" if reason else text)


def retry_seconds(value: object) -> float:
    """Return ``RetryAfter``'s value as seconds from now; raise saying what is wrong."""
    if isinstance(value, str):
        text = value.strip()
        if text.isascii() and text.isdigit():
            value = int(text)
        else:
            try:
                value = parsedate_to_datetime(text)
            except (TypeError, ValueError):
                raise ValueError(
                    f"RetryAfter needs seconds or an HTTP date, got the text {value!r}"
                ) from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"RetryAfter needs an aware datetime, got {value!r}")
        value = max(timedelta(0), value - datetime.now(UTC))
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise TypeError(
            "RetryAfter needs a number of seconds, a timedelta, an aware datetime or a "
            f"Retry-After header's text, not {type(value).__name__}"
        )
    if not math.isfinite(seconds) or not 0 <= seconds <= MAX_DURATION_MS / 1000:
        raise ValueError(f"RetryAfter needs 0 to about 100 years of seconds, got {value!r}")
    return seconds
