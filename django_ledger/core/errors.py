"""Exceptions the ledger raises."""

from __future__ import annotations

__all__ = [
    "CorruptRecord",
    "FusedPathOnly",
    "LedgerError",
    "LedgerUnavailable",
    "NotReplicated",
]


class LedgerError(Exception):
    """Base class of every error the ledger raises on its own account."""


class CorruptRecord(LedgerError):
    """Stored bytes failed to decode or their checksum did not hold."""

    def __init__(self, request_id: str, reason: str) -> None:
        super().__init__(f"record {request_id!r} is corrupt: {reason}")
        self.request_id = request_id
        self.reason = reason


class LedgerUnavailable(LedgerError):
    """Redis could not be reached or dropped the connection mid-call.

    The outcome of the interrupted call is unknown, and every ledger operation is safe
    to call again with the same arguments: admission reconciles by request id, a
    replayed COMPLETED or FAILED settlement of the same claim answers ``SETTLED`` again,
    and a replayed give-back (PENDING) answers ``LOST`` (``not_claimed``) because the
    record is already back to PENDING (``docs/guarantees.md`` has the whole table).
    """


class NotReplicated(LedgerUnavailable):
    """A write is on the queue's master, but fewer replicas than asked acknowledged it.

    Raised with ``LEDGER['DURABILITY']`` (``durability_replicas``) on, when ``WAIT`` ends
    its time-out with fewer than that many replicas. The write was applied and stays
    applied; what is not known is whether it survives a failover before the replicas
    catch up. Like every ``LedgerUnavailable``, the call is safe to make again.
    """

    def __init__(self, where: str, acknowledged: int, wanted: int, timeout_ms: int) -> None:
        super().__init__(
            f"the write of {where} is on the master but only {acknowledged} of {wanted} "
            f"replica(s) acknowledged it within {timeout_ms} ms"
        )
        self.acknowledged = acknowledged
        self.wanted = wanted


class FusedPathOnly(LedgerError):
    """A ledger on the reference path (``optimized=False``) was asked for a job-system extra.

    The reference path keeps to the reference ledger's contract (admit, claim, renew,
    settle, resolve, repair, quarantine, import); workflows and flow limits (a queue's
    and a key's) run on the fused scripts only.
    """

    def __init__(self, feature: str) -> None:
        super().__init__(
            f"{feature} run on the fused path only, and this ledger is on the reference "
            "path (optimized=False): build it with optimized=True (the queue's OPTIMIZED "
            "setting, the default)"
        )
        self.feature = feature
