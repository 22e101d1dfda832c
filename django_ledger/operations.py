"""Operator actions on records: each a compare-and-set on the exact bytes the operator was shown.

The admin and the API show a record with its ``version`` (a digest of the stored
bytes) and send it back with the action; the action re-reads the bytes, refuses with
``RecordChanged`` if their digest differs, and writes through ``write.lua`` with those
bytes as the expected value, so a change in between is refused too.

Every function takes the queue's ledger, plain or sharded: the id is read and written
on the shard that holds it (``ledger.shard_for``), with that shard's clock.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any

from django.utils.translation import gettext

from .core.errors import CorruptRecord, LedgerError
from .core.flows import released, retry_step
from .core.records import Record, State, decode_record, encode_record
from .core.reference import write
from .core.sharded import AnyLedger

__all__ = [
    "RecordChanged",
    "Snapshot",
    "discard",
    "mark_failed",
    "purge",
    "restore",
    "retry_now",
    "snapshot",
    "version_of",
]


class RecordChanged(LedgerError):
    """The record is not what the operator saw: nothing was done."""


def version_of(raw: bytes) -> str:
    """Return the digest that names one exact version of stored bytes."""
    return hashlib.sha256(raw).hexdigest()[:32]


@dataclass(frozen=True)
class Snapshot:
    """One id as stored: its bytes, their version, and the record if they decode."""

    request_id: str
    raw: bytes
    version: str
    record: Record | None
    error: str | None
    quarantined: bytes | None

    @property
    def checksum_ok(self) -> bool:
        return self.record is not None


def snapshot(ledger: AnyLedger, request_id: str) -> Snapshot | None:
    """Read ``request_id`` as stored, corrupt or not, with its quarantine copy if any."""
    ledger = ledger.shard_for(request_id)
    with ledger.translate_errors():
        pipe = ledger.redis.pipeline(transaction=False)
        pipe.hget(ledger.records_key, request_id)
        pipe.hget(ledger.quarantine_key, request_id)
        raw, quarantined = pipe.execute()
    if raw is None:
        if quarantined is None:
            return None
        raw = b""
    record: Record | None = None
    error: str | None = None
    try:
        record = decode_record(request_id, raw)
    except CorruptRecord as exc:
        error = exc.reason
    return Snapshot(request_id, raw, version_of(raw), record, error, quarantined)


def _current(ledger: AnyLedger, request_id: str, version: str) -> Snapshot:
    current = snapshot(ledger, request_id)
    if current is None:
        raise RecordChanged(
            gettext("record %(request_id)r no longer exists") % {"request_id": request_id}
        )
    if current.version != version:
        raise RecordChanged(
            gettext("record %(request_id)r changed since it was shown; nothing was done")
            % {"request_id": request_id}
        )
    return current


def _commit(
    ledger: AnyLedger, current: Snapshot, new: Record | None, **kwargs: Any
) -> Record | None:
    written = write(
        ledger.shard_for(current.request_id).runner,
        current.request_id,
        current.raw,
        b"" if new is None else encode_record(new),
        new,
        **kwargs,
    )
    if written != 1:
        raise _changed_while_acting(current.request_id)
    return new


def _changed_while_acting(request_id: str) -> RecordChanged:
    return RecordChanged(
        gettext("record %(request_id)r changed while acting; nothing was done")
        % {"request_id": request_id}
    )


def _decoded(current: Snapshot) -> Record:
    if current.record is None:
        raise LedgerError(
            f"record {current.request_id!r} is corrupt ({current.error}): use quarantine actions"
        )
    return current.record


def retry_now(ledger: AnyLedger, request_id: str, version: str) -> Record:
    """Put the record back to PENDING, due now, with its attempts counted afresh.

    Any claim on it is lost; the fence is kept, so the next claim's fence still grows.
    """
    current = _current(ledger, request_id, version)
    record = _decoded(current)
    now = ledger.shard_for(request_id).server_time_ms()
    new = replace(
        record,
        state=State.PENDING,
        due_at=now,
        lease_until=None,
        owner="",
        attempts=0,
        updated_at=now,
    )
    if not record.state.terminal:
        _commit(ledger, current, new)
        return new
    # An ended record may be a workflow step: the retry and the reopening of the steps its
    # ending cancelled are one script call, so no settlement of the retried step (nor the
    # operator's process dying) can come between them.
    if retry_step(ledger.shard_for(request_id), request_id, current.raw, new) is None:
        raise _changed_while_acting(request_id)
    return new


def mark_failed(ledger: AnyLedger, request_id: str, version: str) -> Record:
    """End the record as FAILED (any claim on it is lost)."""
    current = _current(ledger, request_id, version)
    record = _decoded(current)
    if record.state.terminal:
        raise LedgerError(f"record {request_id!r} has already ended as {record.state.value}")
    now = ledger.shard_for(request_id).server_time_ms()
    new = replace(record, state=State.FAILED, lease_until=None, owner="", updated_at=now)
    _commit(ledger, current, new)
    released(ledger.shard_for(request_id).runner, request_id)  # a workflow step moves on
    return new


def purge(ledger: AnyLedger, request_id: str, version: str) -> None:
    """Delete a terminal record now, before its retention ends."""
    current = _current(ledger, request_id, version)
    record = _decoded(current)
    if not record.state.terminal:
        raise LedgerError(
            f"only ended records can be purged; {request_id!r} is {record.state.value}"
        )
    _commit(ledger, current, None)


def discard(ledger: AnyLedger, request_id: str, version: str) -> None:
    """Forget a quarantined id: its corrupt bytes and its identity both go."""
    current = _current(ledger, request_id, version)
    if current.quarantined is None:
        raise LedgerError(f"record {request_id!r} is not quarantined")
    # With no record left (only the quarantined copy), the write still checks that
    # none has appeared meanwhile: expected b"" means "must be absent".
    _commit(ledger, current, None)


def restore(ledger: AnyLedger, request_id: str, version: str) -> Record:
    """Take a quarantined id back into service once its bytes decode again."""
    current = _current(ledger, request_id, version)
    if current.quarantined is None:
        raise LedgerError(f"record {request_id!r} is not quarantined")
    record = _decoded(current)
    _commit(ledger, current, record)
    return record
