"""Turning script replies into the ledger's answers."""

from __future__ import annotations

from collections.abc import Sequence

from .arguments import Work
from .errors import CorruptRecord
from .records import Record, State, decode_record
from .results import Admission, AdmissionStatus, Settlement, SettlementStatus

__all__ = ["ADMIT_CODES", "REPAIR_FIELDS", "admitted", "imported", "settlements"]

#: admit.lua's codes: status and reason.
ADMIT_CODES = {
    1: (AdmissionStatus.ADMITTED, None),
    2: (AdmissionStatus.DUPLICATE, None),
    3: (AdmissionStatus.CONFLICT, "payload_differs"),
    4: (AdmissionStatus.FULL, "max_records"),
    5: (AdmissionStatus.CONFLICT, "quarantined"),
    6: (AdmissionStatus.CONFLICT, "corrupt"),
    7: (AdmissionStatus.REJECTED, "id_control_character"),
    8: (AdmissionStatus.CONFLICT, "workflow_step"),
}
#: import_records.lua's codes of a record not written: status and reason.
_IMPORT_REFUSED = {
    4: (AdmissionStatus.FULL, "max_records"),
    6: (AdmissionStatus.REJECTED, "invalid_record"),
    7: (AdmissionStatus.CONFLICT, "workflow_step"),
}
REPAIR_FIELDS = {
    0: "stale",
    2: "reindexed",
    3: "expired",
    4: "dead",
    5: "quarantined",
    6: "purged",
}


def admitted(
    request_id: str, data: bytes, now: int, delay_ms: int, trace: str | None, priority: int = 0
) -> Record:
    """Build the record an admission just stored, as the admit script encoded it."""
    return Record(
        request_id,
        data.decode("utf-8"),
        State.PENDING,
        now + delay_ms,
        created_at=now,
        updated_at=now,
        traceparent=trace,
        priority=priority,
    )


def imported(record: Record, given: frozenset[str], code: int, stored: bytes) -> Admission:
    """Classify the answer of one import: written, an agreeing duplicate, or a conflict."""
    request_id = record.request_id
    if code == 1:
        return Admission(request_id, AdmissionStatus.ADMITTED, None, record)
    if code in _IMPORT_REFUSED:
        return Admission(request_id, *_IMPORT_REFUSED[code])
    try:
        existing = decode_record(request_id, stored)
    except CorruptRecord:
        return Admission(request_id, AdmissionStatus.CONFLICT, "corrupt")
    differs = sorted(name for name in given if getattr(existing, name) != getattr(record, name))
    if differs:
        return Admission(
            request_id, AdmissionStatus.CONFLICT, "differs:" + ",".join(differs), existing
        )
    return Admission(request_id, AdmissionStatus.DUPLICATE, None, existing)


def settlements(
    batch: Sequence[Work], codes: Sequence[int], details: Sequence[bytes]
) -> list[Settlement]:
    """Turn a settle script's answers into ``Settlement``s (records decoded lazily).

    Code 0 is ``LOST`` (the detail says why); any other settled the claim, or renewed it
    when its target was a renewal (``C``) or a start (``S``). One pass, no call per answer: a worker settles thousands.
    """
    lost, settled, renewed = (
        SettlementStatus.LOST,
        SettlementStatus.SETTLED,
        SettlementStatus.RENEWED,
    )
    return [
        Settlement(
            renewed if target in ("C", "S") else settled, request_id=claim.request_id, raw=detail
        )
        if code
        else Settlement(lost, None, detail.decode("ascii"))
        for (claim, target, _, _), code, detail in zip(batch, codes, details, strict=True)
    ]
