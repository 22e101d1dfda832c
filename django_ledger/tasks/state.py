"""A task as the ledger holds it: its record and its result document, read together.

Free of Django's task framework, so the admin and the REST API can show a task on any
Django version; ``results.py`` turns it into Django's ``TaskResult``. The record says
where the task stands; the result document (``core/jobs.py``) says what each settled
attempt did, and each lost one (its worker died, or lost its lease: repair records it,
``core/history.py``). Attempts the document still lacks show as errors of class
``LeaseExpired`` too, their times unknown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..core.history import LEASE_EXPIRED_PATH, lost_attempt_error
from ..core.jobs import Attempt, BadPayload, ResultDoc, TaskPayload, decode_result, decode_task
from ..core.progress import Progress, decode_progress
from ..core.records import Record, State

__all__ = [
    "LEASE_EXPIRED_PATH",
    "NOT_RUN_PATH",
    "STATUS_OF",
    "UNKNOWN_WORKER",
    "TaskState",
    "lost_attempt",
    "task_state",
]

#: Django's ``TaskResultStatus`` value for each record state (a held CLAIMED record, its
#: work not started, is ``READY``).
STATUS_OF = {
    State.PENDING: "READY",
    State.CLAIMED: "RUNNING",
    State.COMPLETED: "SUCCESSFUL",
    State.FAILED: "FAILED",
    State.DEAD: "FAILED",
}
NOT_RUN_PATH = "django_ledger.tasks.exceptions.NotRun"
#: The worker id of an attempt whose worker is not known (it never settled).
UNKNOWN_WORKER = "unknown"


def lost_attempt(worker_id: str, number: int) -> Attempt:
    """Return attempt ``number``, never settled, that the result document lacks.

    Repair records each lost attempt with its worker and times (``core/history.py``);
    this stands for one it did not (repaired before it did so): its times unknown.
    """
    worker = worker_id or UNKNOWN_WORKER
    return Attempt(worker_id=worker, started_at=0, error=lost_attempt_error(worker, number))


def unrun_attempt(worker_id: str, number: int) -> Attempt:
    """Return the record of attempt ``number``, which its worker failed without running."""
    return Attempt(
        worker_id=worker_id or UNKNOWN_WORKER,
        started_at=0,
        error={
            "exception_class_path": NOT_RUN_PATH,
            "traceback": (
                f"Worker {worker_id or UNKNOWN_WORKER!r} failed attempt {number} without "
                "running it: the payload names no task it could run (its log says why).\n"
                f"NotRun: attempt {number} was not run\n"
            ),
        },
    )


@dataclass
class TaskState:
    """Everything known of one task, instants in epoch milliseconds (Redis clock)."""

    request_id: str
    queue: str
    record: Record
    #: The decoded payload, or ``None`` when the record does not hold a task document.
    payload: TaskPayload | None
    status: str
    attempts: list[Attempt] = field(default_factory=list)
    worker_ids: list[str] = field(default_factory=list)
    enqueued_at: int | None = None
    started_at: int | None = None
    last_attempted_at: int | None = None
    finished_at: int | None = None
    has_return_value: bool = False
    return_value: Any = None
    #: Why the stored result document could not be read, if it could not.
    result_problem: str | None = None
    #: What the task last reported (``context.set_progress``, ``context.metadata``).
    progress: Progress | None = None

    @property
    def errors(self) -> list[dict[str, str]]:
        """One ``{"exception_class_path", "traceback"}`` per attempt that raised."""
        return [attempt.error for attempt in self.attempts if attempt.error]

    @property
    def task_path(self) -> str | None:
        return None if self.payload is None else self.payload.task

    @property
    def is_finished(self) -> bool:
        return self.status in ("SUCCESSFUL", "FAILED")


def task_state(
    queue: str, record: Record, raw_result: bytes | None, raw_progress: bytes | None = None
) -> TaskState:
    """Read a record, its stored result document and its progress as one task."""
    try:
        payload: TaskPayload | None = decode_task(record.payload)
    except BadPayload:
        payload = None
    problem = None
    try:
        doc = decode_result(raw_result)
    except BadPayload as exc:
        doc, problem = ResultDoc(), str(exc)
    attempts = list(doc.attempts)
    claimed = record.state is State.CLAIMED
    # A held claim (prefetched by a worker, not started) is not running: the task is
    # READY, and if its worker dies the attempt is given back.
    running = claimed and not record.held
    # A FAILED record whose last attempt left no result was failed unrun (the worker
    # could not plan it); any other attempt missing from the document was never settled.
    unrun = record.state is State.FAILED and len(attempts) < record.attempts
    for number in range(len(attempts) + 1, record.attempts + (0 if claimed else 1)):
        # Only the last attempt of a record no longer CLAIMED was its owner's (a claim
        # replaces the owner, and a given-back held claim's owner spent no attempt).
        last = number == record.attempts
        owner = record.owner if last and not record.given_back else ""
        attempt = unrun_attempt if unrun and last else lost_attempt
        attempts.append(attempt(owner, number))
    state = TaskState(
        request_id=record.request_id,
        queue=queue,
        record=record,
        payload=payload,
        status="READY" if record.held else STATUS_OF[record.state],
        attempts=attempts,
        worker_ids=[attempt.worker_id for attempt in attempts]
        + ([record.owner] if running else []),
        enqueued_at=record.created_at,
        result_problem=problem,
        progress=decode_progress(raw_progress),
    )
    starts = [attempt.started_at for attempt in attempts if attempt.started_at]
    if running:
        starts.append(record.updated_at)
    if starts:
        state.started_at, state.last_attempted_at = starts[0], starts[-1]
    if record.state.terminal:
        ends = [attempt.finished_at for attempt in attempts if attempt.finished_at]
        state.finished_at = (
            ends[-1] if ends and record.state is not State.DEAD else record.updated_at
        )
    if record.state is State.COMPLETED and doc.has_return_value:
        state.has_return_value, state.return_value = True, doc.return_value
    return state
