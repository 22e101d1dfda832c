"""Cancel a task, queued or running: ``django_ledger.tasks.cancel(task_id)``.

The task's record is cancelled fence first, by the path every face of a cancel takes
(``record_cancel.cancel_record``: ``docs/tasks.md``, "Cancelling").
"""

from __future__ import annotations

from ..core.cancelling import CancelStatus
from .backend import LedgerBackend
from .compat import TaskResultDoesNotExist, task_backends
from .record_cancel import CancelOutcome, cancel_record, effects_database

__all__ = ["CancelOutcome", "cancel", "cancel_record", "effects_database"]


def cancel(
    task_id: str, *, by: str | None = None, reason: str = "", backend: str = "default"
) -> CancelOutcome:
    """Cancel task ``task_id`` of ``backend``; ``TaskResultDoesNotExist`` if it has no record.

    ``by`` names who cancels (default: ``"django"``); ``reason`` (up to 500 bytes) is kept
    in the task's error. A task still staged in the outbox (its transaction not yet
    delivered) has no record yet: cancel it once delivered.
    """
    chosen = task_backends[backend]
    if not isinstance(chosen, LedgerBackend):
        raise TypeError(f"backend {backend!r} is not a LedgerBackend")
    state = chosen.task_state(task_id)  # TaskResultDoesNotExist: no record in any queue
    outcome = cancel_record(
        state.queue,
        task_id,
        by=by or "django",
        reason=reason,
        database=chosen.transactions.database,
    )
    if outcome.status == CancelStatus.MISSING.value:  # purged between the read and the cancel
        raise TaskResultDoesNotExist(task_id)
    return outcome
