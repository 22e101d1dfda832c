"""Admission of a unique call in one script call (``lua/scripts/unique.lua``).

A unique call (a task and its arguments, named by a digest) is held by one record at a
time, for as long as its ``UniqueMode`` says: the record's whole life (the id is the
call's own), until it is first claimed, until it ends, or for a period from its
admission. An admission while the call is held answers the holder (``DUPLICATE`` with
its id); after, it admits a new record under the id given and makes it the holder. The
holder's state is read in the same script as the admission, so a claim releases
``start`` exactly when it starts the record, and two racing admissions never both win.

A ``debounce`` moves a held record that is PENDING and never started to later (never
earlier), up to ``max_wait`` from its admission. An extra of the job system: the fused
path only (``FusedPathOnly``), and not in a queue with a ``KEY`` (its pool is not moved).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from .admission import checked_request
from .answers import ADMIT_CODES, admitted
from .arguments import check_priority
from .errors import LedgerError
from .ledger_base import LedgerBase
from .records import decode_record, traceparent_problem
from .results import Admission, AdmissionStatus

__all__ = ["UniqueMode", "UniqueNotHere", "admit_unique"]


class UniqueMode(enum.Enum):
    """How long one record holds a unique call."""

    RECORD = "record"  # while the record is kept: the id is the call's own
    START = "start"  # until a worker first claims it
    END = "end"  # until it ends (COMPLETED, FAILED, DEAD)
    PERIOD = "period"  # for a period from its admission


class UniqueNotHere(LedgerError):
    """A unique mode or debounce asked of a queue that cannot keep it (a ``KEY``)."""


@dataclass(frozen=True)
class Debounce:
    """Move a held, never-started record to ``delay_ms`` after each repeat, at most ``most_ms``
    after its admission."""

    delay_ms: int
    most_ms: int


def admit_unique(
    ledger: LedgerBase,
    request_id: str,
    payload: str,
    *,
    mode: UniqueMode,
    digest: str = "",
    period_ms: int = 0,
    debounce: Debounce | None = None,
    delay_ms: int = 0,
    traceparent: str | None = None,
    priority: int = 0,
) -> Admission:
    """Admit ``request_id`` unless the call ``digest`` is held; see the module.

    The answer names the record answered: the new one (``ADMITTED``) or the holder
    (``DUPLICATE``, ``request_id`` the holder's, ``record`` its bytes after a debounce).
    """
    ledger.fused_only("unique admission")
    if ledger.limit_key is not None:
        raise UniqueNotHere(
            f"queue {ledger.queue!r} has a KEY: a unique task held until its start, its end "
            "or for a period, and debounce, need a queue without one"
        )
    if not isinstance(mode, UniqueMode):
        raise TypeError(f"mode must be a UniqueMode, not {mode!r}")
    if (mode is UniqueMode.RECORD) != (digest == ""):
        raise ValueError("a digest names the call in every mode but RECORD (the id is the call)")
    check_priority(priority)
    problem, data = checked_request(ledger, request_id, payload, traceparent_problem(traceparent))
    if problem is not None:
        return Admission(request_id, AdmissionStatus.REJECTED, problem)
    runner = ledger.runner
    args = [
        ledger.max_records,
        delay_ms,
        traceparent or "",
        priority,
        mode.value,
        period_ms,
        debounce.delay_ms if debounce else 0,
        debounce.most_ms if debounce else 0,
        digest,
        request_id,
        data,
    ]
    now, code, detail, answered, due = runner.run(runner.scripts.unique, args)
    status, reason = ADMIT_CODES[int(code)]
    holder = answered.decode("utf-8") if isinstance(answered, bytes) else str(answered)
    if status is AdmissionStatus.ADMITTED:
        record = admitted(holder, data, now, due - now, traceparent, priority)
        return Admission(holder, status, reason, record, times=(now, due))
    return Admission(holder, status, reason, decode_record(holder, detail) if detail else None)
