"""What the ledger's operations answer."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from .records import Record, decode_record, ms_to_datetime

__all__ = [
    "Admission",
    "AdmissionStatus",
    "Claim",
    "Claims",
    "RepairReport",
    "Settlement",
    "SettlementStatus",
    "Stats",
]


class AdmissionStatus(enum.Enum):
    ADMITTED = "ADMITTED"
    DUPLICATE = "DUPLICATE"
    CONFLICT = "CONFLICT"
    FULL = "FULL"
    REJECTED = "REJECTED"

    def __str__(self) -> str:
        return self.value


class SettlementStatus(enum.Enum):
    RENEWED = "RENEWED"
    SETTLED = "SETTLED"
    LOST = "LOST"

    def __str__(self) -> str:
        return self.value


class Admission:
    """The answer to one admission.

    ``reason`` is a stable code for every status but ``ADMITTED`` and ``DUPLICATE``
    (``payload_differs``, ``quarantined``, ``corrupt``, ``workflow_step``, ``max_records``,
    ``gate_open``, ``payload_too_large``, ``id_too_long``, ...). ``record`` is the stored record when
    there is one that decodes; for a batch it is built on first access, so admitting
    many costs nothing for records nobody reads.
    """

    __slots__ = ("_make", "_record", "reason", "request_id", "status", "times")

    def __init__(
        self,
        request_id: str,
        status: AdmissionStatus,
        reason: str | None = None,
        record: Record | None = None,
        *,
        make: Callable[[], Record | None] | None = None,
        times: tuple[int, int] | None = None,
    ) -> None:
        self.request_id = request_id
        self.status = status
        self.reason = reason
        self._record = record
        self._make = make
        #: An admission just made: (created_at, due_at) of its record, in epoch ms on the
        #: Redis clock, known without building the record. ``None`` for every other answer.
        self.times = times

    @property
    def record(self) -> Record | None:
        if self._make is not None:
            self._record, self._make = self._make(), None
        return self._record

    @property
    def accepted(self) -> bool:
        """True when the request is in the ledger (new or already there)."""
        return self.status in (AdmissionStatus.ADMITTED, AdmissionStatus.DUPLICATE)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Admission):
            return NotImplemented
        return (self.request_id, self.status, self.reason, self.record) == (
            other.request_id,
            other.status,
            other.reason,
            other.record,
        )

    def __hash__(self) -> int:
        return hash((self.request_id, self.status, self.reason))

    def __repr__(self) -> str:
        return (
            f"Admission(request_id={self.request_id!r}, status={self.status}, "
            f"reason={self.reason!r}, record={self.record!r})"
        )


@dataclass(slots=True)
class Claim:
    """A record handed to ``owner`` until ``lease_until`` (epoch ms, Redis clock).

    ``renew`` moves ``lease_until`` forward on this same object, which stays valid for
    ``settle``. Hand ``fence`` to downstream systems: it grows with every claim of the
    record, so they can refuse a stale worker.
    """

    request_id: str
    payload: str
    owner: str
    attempt: int
    fence: int
    lease_until: int
    traceparent: str | None = None
    #: Claimed and held, its work not started (``claim_many(hold_after=)``): until a call
    #: marks it started, repair gives its attempt back if its lease runs out.
    held: bool = False

    @property
    def lease_until_datetime(self) -> datetime:
        return ms_to_datetime(self.lease_until)


class Claims(list[Claim]):
    """The claims one call made, and when the next PENDING record falls due.

    ``due_in_ms``: how long after the call (milliseconds, server clock) the earliest
    PENDING record it left falls due: 0 when more is due now, ``None`` when none is
    pending (or it is not known). While the gate is closed, a second. A worker with nothing due
    blocks until then, woken sooner by an admission (docs/worker.md, Waking).
    """

    due_in_ms: int | None = None

    @classmethod
    def of(cls, claims: list[Claim], due_in_ms: int | None) -> Claims:
        made = cls(claims)
        made.due_in_ms = due_in_ms
        return made


def earliest(*waits: int | None) -> int | None:
    """The shortest of the waits that are known (``None``: none is)."""
    known = [wait for wait in waits if wait is not None]
    return min(known) if known else None


class Settlement:
    """The answer to ``renew`` or ``settle``; ``reason`` says why a claim was ``LOST``.

    ``record`` is the record as the settlement left it, decoded (and verified) on first
    access, so a batch of settlements costs nothing for records nobody reads.
    """

    __slots__ = ("_raw", "_record", "_request_id", "reason", "status")

    def __init__(
        self,
        status: SettlementStatus,
        record: Record | None = None,
        reason: str | None = None,
        *,
        request_id: str | None = None,
        raw: bytes | None = None,
    ) -> None:
        self.status = status
        self.reason = reason
        self._record = record
        self._request_id = request_id
        self._raw = raw

    @property
    def record(self) -> Record | None:
        if self._record is None and self._raw is not None and self._request_id is not None:
            self._record = decode_record(self._request_id, self._raw)
        return self._record

    @property
    def due_at(self) -> int | None:
        """The record's due time (epoch ms), read from its bytes without decoding them.

        What the counters' wait time needs: the bytes the settlement's own script
        wrote, at the offset every record version keeps it (``records.py``).
        """
        if self._record is not None:
            return self._record.due_at
        raw = self._raw
        if raw is None or len(raw) < 18:
            return None
        return int.from_bytes(raw[10:18], "big")

    @property
    def ok(self) -> bool:
        return self.status is not SettlementStatus.LOST

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Settlement):
            return NotImplemented
        return (self.status, self.reason, self.record) == (other.status, other.reason, other.record)

    def __hash__(self) -> int:
        return hash((self.status, self.reason))

    def __repr__(self) -> str:
        return f"Settlement(status={self.status}, reason={self.reason!r}, record={self.record!r})"


@dataclass(slots=True)
class RepairReport:
    """What one repair page (or a whole cycle, when added up) did."""

    cursor: str = "0"
    scanned: int = 0
    reindexed: int = 0
    expired: int = 0
    dead: int = 0
    quarantined: int = 0
    purged: int = 0
    stale: int = 0

    def add(self, other: RepairReport) -> None:
        """Add ``other``'s counts to this report and take its cursor."""
        self.cursor = other.cursor
        for name in _REPAIR_COUNTS:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    def counts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in _REPAIR_COUNTS}


_REPAIR_COUNTS = ("scanned", "reindexed", "expired", "dead", "quarantined", "purged", "stale")


@dataclass(frozen=True, slots=True)
class Stats:
    """Read-only counters of one queue, read from the indexes (no scan of records)."""

    pending_due: int
    pending_later: int
    claimed: int
    expired_leases: int
    completed: int
    failed: int
    dead: int
    quarantined: int
    total: int
    gate_closed: bool
    now: int
    oldest_due_at: int | None = None

    @classmethod
    def summed(cls, parts: Sequence[Stats]) -> Stats:
        """One queue's counters from its shards' (gate closed if any is; latest clock)."""
        oldest = [part.oldest_due_at for part in parts if part.oldest_due_at is not None]
        return cls(
            **{name: sum(getattr(part, name) for part in parts) for name in STATS_COUNTS},
            gate_closed=any(part.gate_closed for part in parts),
            now=max(part.now for part in parts),
            oldest_due_at=min(oldest) if oldest else None,
        )

    @property
    def pending(self) -> int:
        return self.pending_due + self.pending_later

    @property
    def demand(self) -> int:
        """The workers this queue wants now: records due to run plus records running.

        Records due later are left out (they need no worker yet); running ones are kept in,
        so an autoscaler never scales to zero under a task that is still running.
        """
        return self.pending_due + self.claimed

    @property
    def at_rest(self) -> bool:
        """Nothing PENDING or CLAIMED, and every record counted by an index or quarantine.

        A record whose index entry was lost (a script that stopped halfway, a failover),
        or an entry whose record is gone, makes the counts disagree: such a queue is not
        at rest, and a worker's repair passes go on until they agree again.
        """
        ended = self.completed + self.failed + self.dead + self.quarantined
        return self.pending == 0 and self.claimed == 0 and self.total == ended

    @property
    def oldest_due_age_ms(self) -> int | None:
        """How long the oldest due record has waited, or ``None`` when none is due."""
        if self.oldest_due_at is None or self.oldest_due_at > self.now:
            return None
        return self.now - self.oldest_due_at

    def as_dict(self) -> dict[str, int | bool | None]:
        return {
            **{name: getattr(self, name) for name in STATS_COUNTS},
            "gate_closed": self.gate_closed,
            "oldest_due_age_ms": self.oldest_due_age_ms,
        }


#: The counts of ``Stats``, in its order.
STATS_COUNTS = (
    "pending_due",
    "pending_later",
    "claimed",
    "expired_leases",
    "completed",
    "failed",
    "dead",
    "quarantined",
    "total",
)
