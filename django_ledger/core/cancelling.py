"""Cancel one record, queued or running, in one script call (``lua/scripts/cancel.lua``).

A PENDING record (due later, held back by a limit, or due now) ends FAILED at once and
never runs. A CLAIMED one ends FAILED under a new fence: the cancelled run's renewals
and settlement answer LOST (``superseded``), and effects it fences with its claim's
fence yield to the larger one. An ended record is left as it is. Each cancelled record's
result document gains an attempt whose error is ``django_ledger.tasks.Cancelled``,
naming who cancelled it, when and why; a workflow step's dependants move on as for a
failed step.

The core knows no database: a caller that fences database effects takes a fence first
(``next_fence``), raises its effects' fence to it, and passes it as ``fence_floor``, so
no effect of the cancelled run can commit after the cancel (the task layer does this).
Cancel is an extra of the job system: the fused path only (``FusedPathOnly``).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .errors import CorruptRecord
from .ledger_base import LedgerBase
from .records import Record, State, decode_record, id_problem

__all__ = [
    "MAX_BY_BYTES",
    "MAX_REASON_BYTES",
    "CancelStatus",
    "Cancellation",
    "cancel",
    "next_fence",
]

#: The most bytes (UTF-8) of who cancelled, and of why.
MAX_BY_BYTES = 200
MAX_REASON_BYTES = 500


class CancelStatus(enum.Enum):
    """What a cancel did."""

    CANCELLED = "cancelled"  # the record ended FAILED now
    ENDED = "ended"  # it had ended already (COMPLETED, FAILED or DEAD): left as it is
    CHANGED = "changed"  # it was no longer the bytes the caller saw: nothing done
    MISSING = "missing"  # no such record (never admitted, or purged)
    CORRUPT = "corrupt"  # its bytes do not decode (or it is quarantined): nothing done


_BY_LETTER = {state.letter: state for state in State}
_CODES = {
    1: CancelStatus.CANCELLED,
    2: CancelStatus.ENDED,
    3: CancelStatus.CHANGED,
    0: CancelStatus.MISSING,
    -1: CancelStatus.CORRUPT,
}


@dataclass(frozen=True)
class Cancellation:
    """The answer of ``Ledger.cancel``.

    ``was``: the state the record was in (``None`` when missing or corrupt); ``fence``:
    the record's fence now (the cancellation's own when cancelled); ``record``: the record
    as stored after the call (``None`` when missing or corrupt).
    """

    request_id: str
    status: CancelStatus
    was: State | None
    fence: int
    record: Record | None

    @property
    def cancelled(self) -> bool:
        return self.status is CancelStatus.CANCELLED


def _text(value: object, what: str, limit: int) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    if len(value.encode("utf-8", "surrogatepass")) > limit:
        raise ValueError(f"{what} is longer than {limit} bytes (UTF-8)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} is not valid text: {exc.reason}") from None
    return value


def cancel(
    ledger: LedgerBase,
    request_id: str,
    *,
    by: str,
    reason: str = "",
    fence_floor: int = 0,
    expect: bytes | None = None,
) -> Cancellation:
    """Cancel ``request_id`` (see the module); ``expect``: only if still these bytes."""
    problem = id_problem(request_id)
    if problem is not None:
        raise ValueError(problem)
    by = _text(by, "by", MAX_BY_BYTES)
    if not by:
        raise ValueError("by must name who cancels (a user name, a service)")
    reason = _text(reason, "reason", MAX_REASON_BYTES)
    if isinstance(fence_floor, bool) or not isinstance(fence_floor, int) or fence_floor < 0:
        raise ValueError(f"fence_floor must be an int of at least 0, got {fence_floor!r}")
    if expect is not None and (not isinstance(expect, bytes) or not expect):
        raise TypeError("expect must be the record's stored bytes (non-empty bytes) or None")
    ledger.fused_only("cancel")
    runner = ledger.runner
    args = [request_id, by, reason, fence_floor, expect or b"", ledger.max_retained]
    code, was, fence, raw = runner.run(runner.scripts.cancel, args)
    status = _CODES[int(code)]
    record: Record | None = None
    if status in (CancelStatus.CANCELLED, CancelStatus.ENDED, CancelStatus.CHANGED):
        try:
            record = decode_record(request_id, raw)
        except CorruptRecord:  # pragma: no cover - the script decoded the same bytes
            record = None
    state = _BY_LETTER.get(was if isinstance(was, bytes) else str(was).encode())
    return Cancellation(request_id, status, state, int(fence), record)


def next_fence(ledger: LedgerBase, floor: int = 0) -> int:
    """Take a fence above every fence the queue gave before (and above ``floor``)."""
    if isinstance(floor, bool) or not isinstance(floor, int) or floor < 0:
        raise ValueError(f"floor must be an int of at least 0, got {floor!r}")
    runner = ledger.runner
    return int(runner.run(runner.scripts.fence, [floor]))
