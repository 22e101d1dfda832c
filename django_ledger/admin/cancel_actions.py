"""The records' Cancel action, and "Mark failed" of a running record through the same path.

Both go the one Django path of a cancel (``services.cancelling.cancel_record``: the
record's fenced effects first, then the record, on the version the operator was shown):
a waiting record ends FAILED and never runs; a running one ends FAILED under a new fence,
its worker hears of it within a second and tells the task to stop, and whatever the run
settles late is refused. "Mark failed" of a record that is not running stays the plain
compare-and-set it was (``operations.mark_failed``), as does any on the reference path,
which has no cancel.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext, gettext_lazy, pgettext_lazy

from .. import operations
from ..core.errors import LedgerError
from ..core.records import State
from ..core.sharded import AnyLedger
from ..operations import RecordChanged
from ..services.cancelling import cancel_record, effects_database
from .actions import OPERATIONS, Note, Operation, _not_ended

__all__ = ["CANCEL", "FAIL_OR_CANCEL"]


def _cancelled(ledger: AnyLedger, request_id: str, version: str, by: str, how: str) -> Note:
    """Cancel the record if still ``version``; what happened, or raise why not."""
    outcome = cancel_record(
        ledger.queue, request_id, by=by, reason=how, database=effects_database(), version=version
    )
    if outcome.status == "changed":
        raise RecordChanged(gettext("it changed since it was shown"))
    if outcome.status == "ended":
        raise LedgerError(gettext("it has already ended"))
    if outcome.status != "cancelled":
        raise LedgerError(
            gettext("no record could be cancelled (%(status)s)") % {"status": outcome.status}
        )
    if outcome.was == State.CLAIMED.value:
        return Note(
            gettext(
                "Record %(request_id)s was running: it ended FAILED now, its worker is told to stop "
                "the task, and whatever the task settles late will be refused."
            )
            % {"request_id": request_id}
        )
    return Note(
        gettext("Record %(request_id)s had not started: it ended FAILED and will never run.")
        % {"request_id": request_id}
    )


def cancel(ledger: AnyLedger, request_id: str, version: str, by: str) -> Note:
    """The Cancel action: cancel the record the operator was shown."""
    return _cancelled(ledger, request_id, version, by, "cancelled from the admin")


def fail_or_cancel(ledger: AnyLedger, request_id: str, version: str, by: str) -> Any:
    """ "Mark failed": a running record is cancelled (its task told to stop), any other failed."""
    snap = operations.snapshot(ledger, request_id)
    record = None if snap is None else snap.record
    if record is not None and record.state is State.CLAIMED and ledger.optimized:
        return _cancelled(ledger, request_id, version, by, "marked failed from the admin")
    return operations.mark_failed(ledger, request_id, version)


CANCEL = Operation(
    "cancel",
    "operate",
    pgettext_lazy("an action on a task", "Cancel"),
    gettext_lazy("Cancelled"),
    cancel,
    _not_ended,
    warning=gettext_lazy(
        "The task ends FAILED now: if it waits, it never runs; if it runs, its worker tells "
        "it to stop, and whatever it settles late is refused."
    ),
    warning_many=gettext_lazy(
        "The tasks end FAILED now: those waiting never run; for those running, their "
        "workers tell them to stop, and whatever they settle late is refused."
    ),
    by_user=True,
)

FAIL_OR_CANCEL = Operation(
    "fail",
    "fail",
    OPERATIONS["fail"].label,
    OPERATIONS["fail"].done,
    fail_or_cancel,
    _not_ended,
    warning=gettext_lazy(
        "The record ends as FAILED; if it is running, its worker is told to stop the task "
        "and whatever the task settles late is refused."
    ),
    warning_many=gettext_lazy(
        "The records end as FAILED; for those running, their workers are told to stop the "
        "tasks and whatever the tasks settle late is refused."
    ),
    by_user=True,
)
