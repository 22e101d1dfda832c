"""The canonical record, its states, and its versioned byte encoding.

Encoding version 1 (documented for other languages in ``docs/encoding.md``)::

    1:<ck>:<S>:<due_at>:<lease_until>:<attempts>:<fence>:<created_at>:<updated_at>:<olen>:<tlen>:<owner><traceparent><payload>

``ck`` is the first 8 lowercase hex digits of SHA-1 over the request id (UTF-8), one
NUL byte, and every byte after ``1:<ck>:``. Binding the id into the checksum means a
record copied under another id is detected as corrupt, without storing the id twice.
The Lua scripts in ``django_ledger/lua/codec.lua`` implement the same format.
"""

from __future__ import annotations

import enum
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from .errors import CorruptRecord

__all__ = [
    "MAX_ID_BYTES",
    "MAX_OWNER_BYTES",
    "Record",
    "State",
    "decode_record",
    "encode_record",
    "id_problem",
    "ms_to_datetime",
    "owner_problem",
    "traceparent_problem",
]

MAX_ID_BYTES = 256
MAX_OWNER_BYTES = 256
VERSION = b"1"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$")


class State(enum.Enum):
    """Where a record stands."""

    PENDING = "PENDING"
    CLAIMED = "CLAIMED"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    DEAD = "DEAD"

    @property
    def terminal(self) -> bool:
        return self in _TERMINAL

    @property
    def letter(self) -> bytes:
        return _LETTER[self]

    def __str__(self) -> str:
        return self.value


_TERMINAL = frozenset({State.COMPLETED, State.FAILED, State.DEAD})
_LETTER = {
    State.PENDING: b"P",
    State.CLAIMED: b"C",
    State.COMPLETED: b"K",
    State.FAILED: b"F",
    State.DEAD: b"D",
}
_BY_LETTER = {letter: state for state, letter in _LETTER.items()}


def ms_to_datetime(ms: int) -> datetime:
    """Turn epoch milliseconds into an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


@dataclass(frozen=True, slots=True)
class Record:
    """One request as the ledger holds it. Instants are epoch milliseconds."""

    request_id: str
    payload: str
    state: State
    due_at: int
    owner: str = ""
    attempts: int = 0
    fence: int = 0
    lease_until: int | None = None
    created_at: int = 0
    updated_at: int = 0
    traceparent: str | None = None

    @property
    def due_datetime(self) -> datetime:
        return ms_to_datetime(self.due_at)

    @property
    def lease_until_datetime(self) -> datetime | None:
        return None if self.lease_until is None else ms_to_datetime(self.lease_until)

    @property
    def created_datetime(self) -> datetime:
        return ms_to_datetime(self.created_at)

    @property
    def updated_datetime(self) -> datetime:
        return ms_to_datetime(self.updated_at)

    def index_score(self) -> int | None:
        """Return the score of this record in its state's index, if it has one."""
        if self.state is State.PENDING:
            return self.due_at
        if self.state is State.CLAIMED:
            return self.lease_until
        return self.updated_at


def _text_problem(value: object, what: str, limit: int, *, empty_ok: bool) -> str | None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        return None if empty_ok else f"{what}_empty"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return f"{what}_not_utf8"
    if size > limit:
        return f"{what}_too_long"
    if _CONTROL.search(value):
        return f"{what}_control_character"
    return None


def id_problem(request_id: object) -> str | None:
    """Return why ``request_id`` is unusable as a reason code, or ``None``."""
    return _text_problem(request_id, "id", MAX_ID_BYTES, empty_ok=False)


def owner_problem(owner: object, *, empty_ok: bool = False) -> str | None:
    """Return why ``owner`` is unusable as a reason code, or ``None``."""
    return _text_problem(owner, "owner", MAX_OWNER_BYTES, empty_ok=empty_ok)


def traceparent_problem(traceparent: object) -> str | None:
    """Return why ``traceparent`` is not W3C trace context, or ``None``."""
    if traceparent is None:
        return None
    if not isinstance(traceparent, str):
        raise TypeError(f"traceparent must be a str or None, not {type(traceparent).__name__}")
    if not _TRACEPARENT.match(traceparent) or traceparent.startswith("ff"):
        return "traceparent_invalid"
    _, trace_id, span_id, _ = traceparent.split("-")
    if set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return "traceparent_invalid"
    return None


def checksum(request_id: bytes, body: bytes) -> bytes:
    return hashlib.sha1(request_id + b"\0" + body, usedforsecurity=False).hexdigest()[:8].encode()


def encode_record(record: Record) -> bytes:
    """Encode ``record`` (version 1). Raises ``ValueError`` on text that is not UTF-8."""
    try:
        owner = record.owner.encode("utf-8")
        trace = (record.traceparent or "").encode("utf-8")
        payload = record.payload.encode("utf-8")
        request_id = record.request_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"record {record.request_id!r} holds text that is not UTF-8: {exc}") from exc
    lease = b"" if record.lease_until is None else b"%d" % record.lease_until
    body = b"%s:%d:%s:%d:%d:%d:%d:%d:%d:%s%s%s" % (
        record.state.letter,
        record.due_at,
        lease,
        record.attempts,
        record.fence,
        record.created_at,
        record.updated_at,
        len(owner),
        len(trace),
        owner,
        trace,
        payload,
    )
    return b"1:" + checksum(request_id, body) + b":" + body


def decode_record(request_id: str, raw: bytes) -> Record:
    """Decode and verify stored bytes; raise ``CorruptRecord`` naming the id if they fail."""
    if raw[:2] != b"1:" or raw[10:11] != b":":
        raise CorruptRecord(request_id, "unknown encoding version or malformed header")
    if checksum(request_id.encode("utf-8"), raw[11:]) != raw[2:10]:
        raise CorruptRecord(request_id, "checksum mismatch")
    parts = raw.split(b":", 11)
    if len(parts) != 12:
        raise CorruptRecord(request_id, "truncated header")
    try:
        state = _BY_LETTER[parts[2]]
        due_at, attempts, fence, created_at, updated_at, olen, tlen = (
            _natural(parts[i]) for i in (3, 5, 6, 7, 8, 9, 10)
        )
        lease_until = _natural(parts[4]) if parts[4] else None
        tail = parts[11]
        if olen + tlen > len(tail):
            raise ValueError("field lengths exceed the record")
        owner = tail[:olen].decode("utf-8")
        trace = tail[olen : olen + tlen].decode("utf-8")
        payload = tail[olen + tlen :].decode("utf-8")
    except (KeyError, ValueError) as exc:
        raise CorruptRecord(request_id, f"malformed field: {exc}") from exc
    if (lease_until is None) != (state is not State.CLAIMED):
        raise CorruptRecord(request_id, "lease does not match state")
    return Record(
        request_id=request_id,
        payload=payload,
        state=state,
        due_at=due_at,
        owner=owner,
        attempts=attempts,
        fence=fence,
        lease_until=lease_until,
        created_at=created_at,
        updated_at=updated_at,
        traceparent=trace or None,
    )


def _natural(digits: bytes) -> int:
    if not digits.isdigit():
        raise ValueError(f"{digits!r} is not a natural number")
    return int(digits)
