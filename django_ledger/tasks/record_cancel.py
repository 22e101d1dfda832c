"""One record's cancel, fence first: the path every face of a cancel takes.

Three steps, in an order that keeps the effects promise (``docs/tasks.md``,
"Cancelling"): take a fence above every fence the record's queue gave
(``Ledger.next_fence``); raise the record's effects row to it, not done, where the outbox
table exists (``outbox.effects.tombstone``: an effects block in flight commits first
and is then reported, any later one of the cancelled run raises ``StaleAttempt``); then
cancel the record with that fence as its floor (``Ledger.cancel``). A retry an operator
starts later claims a larger fence still, so the tombstone never blocks it.

Nothing here needs Django's task framework: the admin, the API and ``ledger_cancel``
cancel the records of raw handlers' queues in a project without it, too.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ..core.cancelling import CancelStatus
from ..outbox.effects import tombstone
from ..outbox.tables import outbox_ready
from ..queues import queues

__all__ = ["CancelOutcome", "cancel_record", "effects_database"]


@dataclass(frozen=True)
class CancelOutcome:
    """What ``cancel`` did to task ``task_id``.

    ``status``: ``cancelled`` (it ended FAILED now), ``ended`` (it had ended: nothing
    changed), ``changed`` or ``corrupt`` (nothing done); ``was`` the state it was in;
    ``fence`` its fence now; ``effects_committed`` whether its fenced effects had
    committed before the cancel (``None``: the database has no effects table).
    """

    task_id: str
    queue: str
    status: str
    was: str | None
    fence: int
    effects_committed: bool | None

    @property
    def cancelled(self) -> bool:
        return self.status == CancelStatus.CANCELLED.value


def cancel_record(
    queue: str,
    request_id: str,
    *,
    by: str,
    reason: str = "",
    database: str = "default",
    version: str | None = None,
) -> CancelOutcome:
    """Cancel record ``request_id`` of ``queue`` (a configured queue), fence first.

    The one path of every Django face (``cancel``, the API, ``ledger_cancel``): the
    effects of ``database`` are fenced before the record is cancelled. ``version``: only
    if the record is still the version an operator was shown (``operations.version_of``:
    the first 32 hex digits of the SHA-256 of its bytes).
    """
    ledger = queues.get(queue).ledger.shard_for(request_id)
    ledger.fused_only("cancel")
    expect: bytes | None = None
    if version is not None:
        with ledger.translate_errors():
            stored = ledger.redis.hget(ledger.records_key, request_id)
        if stored is not None:
            if hashlib.sha256(stored).hexdigest()[:32] != version:
                return CancelOutcome(request_id, queue, "changed", None, 0, None)
            expect = stored
    fence = ledger.next_fence()
    committed = tombstone(request_id, fence, database) if outbox_ready(database) else None
    answer = ledger.cancel(request_id, by=by, reason=reason, fence_floor=fence, expect=expect)
    return CancelOutcome(
        request_id,
        queue,
        answer.status.value,
        None if answer.was is None else answer.was.value,
        answer.fence,
        committed,
    )


def effects_database(backend: str = "default") -> str:
    """The database of ``backend``'s fenced effects (``DATABASE``), else ``"default"``."""
    try:
        from .backend import LedgerBackend
        from .compat import task_backends

        chosen = task_backends[backend]
    except Exception:  # no such backend, or no task framework installed or configured
        return "default"
    return chosen.transactions.database if isinstance(chosen, LedgerBackend) else "default"
