"""The canonical record, its states, and its versioned byte encoding.

Encoding version 1 (``docs/encoding.md`` documents it for other languages; the Lua
scripts in ``core/lua/lib/codec.lua`` read and write the same bytes)::

    offset size field
    0      1    b"1" (the version)
    1      8    H: first 8 lowercase hex digits of SHA-1(request_id || 0x00 || bytes[9:])
    9      1    state letter: P C K(COMPLETED) F D
    10     8    due_at, unsigned big-endian, epoch ms
    18     8    lease_until (0 unless CLAIMED)
    26     8    attempts
    34     8    fence
    42     8    created_at
    50     8    updated_at
    58     2    olen: owner length in bytes
    60     1    tlen: traceparent length in bytes
    61     olen owner, then tlen bytes of traceparent, then the payload to the end (all UTF-8)

H covers every byte after it and binds the request id, so a record copied under another
id fails to decode, without the id being stored twice.

Version 2 is version 1 with one more byte at offset 61, the priority as a signed 8-bit
integer (-100..100, never 0), before the owner; its H is over the id, 0x00, the version
byte ``2`` and bytes[9:]. Records of priority 0 are written as version 1, so a queue that
never uses priorities holds exactly the bytes it always did.

Version 3 is version 2 with a flags byte at offset 62 (the priority byte at 61 may be 0),
the owner from 63: bit 0 ``held`` (CLAIMED, its work not started), bit 1 ``given_back``
(PENDING: repair gave back the attempt of a held claim; the next claim is not held).
Its H binds the version byte ``3``. Only records with a flag set are written as version 3.
"""

from __future__ import annotations

import enum
import hashlib
import re
import struct
from dataclasses import dataclass
from datetime import UTC, datetime

from .errors import CorruptRecord

__all__ = [
    "MAX_ID_BYTES",
    "MAX_OWNER_BYTES",
    "MAX_PRIORITY",
    "MIN_PRIORITY",
    "PRIORITY_STEP",
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
VERSION_PRIORITY = b"2"
VERSION_FLAGS = b"3"
#: Version 3's flags: a held claim (not started), a PENDING record given back unstarted.
FLAG_HELD, FLAG_GIVEN_BACK = 1, 2
#: Priorities run from -100 to 100; a higher one is claimed first among due records.
MIN_PRIORITY, MAX_PRIORITY = -100, 100
#: How far apart priorities lie in the ready index: a PENDING record's score is
#: ``due_at - priority * PRIORITY_STEP`` (exact in a double: |score| < 2**53), so one
#: sorted set orders by priority first, then due time (codec.lua's score_of, the same).
PRIORITY_STEP = 2**43
#: Largest attempts, fence or instant the format holds exactly (Lua numbers are doubles).
MAX_COUNTER = 2**53
_LAYOUT = struct.Struct(">8scQQQQQQHB")
_BODY = struct.Struct(">cQQQQQQHB")
_HEAD = 1 + _LAYOUT.size
_PRIORITY = struct.Struct(">b")
#: C0, DEL, C1 and the line and paragraph separators (codec.lua's has_control, alike).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


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
    priority: int = 0
    #: CLAIMED and held by its owner, its work not started: repair of its expired lease
    #: gives the attempt back (PENDING, ``attempts`` restored) instead of spending it.
    held: bool = False
    #: PENDING after repair gave back a held claim's attempt: its next claim is never
    #: held, so a task that kills its worker as it starts still spends its attempts.
    given_back: bool = False

    @property
    def due_datetime(self) -> datetime:
        return ms_to_datetime(self.due_at)

    @property
    def lease_until_datetime(self) -> datetime | None:
        return None if self.lease_until is None else ms_to_datetime(self.lease_until)

    def index_score(self) -> int | None:
        """Return the score of this record in its state's index, if it has one."""
        if self.state is State.PENDING:
            return self.due_at - self.priority * PRIORITY_STEP
        if self.state is State.CLAIMED:
            return self.lease_until
        return self.updated_at


def _text_problem(value: object, what: str, limit: int, *, empty_ok: bool) -> str | None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not value:
        return None if empty_ok else f"{what}_empty"
    if value.isascii() and value.isprintable():  # the common case, without encoding
        return f"{what}_too_long" if len(value) > limit else None
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
    if not _TRACEPARENT.fullmatch(traceparent) or traceparent.startswith("ff"):
        return "traceparent_invalid"
    _, trace_id, span_id, _ = traceparent.split("-")
    if set(trace_id) == {"0"} or set(span_id) == {"0"}:
        return "traceparent_invalid"
    return None


def checksum(request_id: bytes, body: bytes) -> bytes:
    """Return H for a record of ``request_id`` whose bytes after H are ``body``."""
    return hashlib.sha1(request_id + b"\0" + body, usedforsecurity=False).hexdigest()[:8].encode()


def encode_record(record: Record) -> bytes:
    """Encode ``record`` (version 1, or 2 with a priority).

    Raise ``ValueError`` for what the format cannot hold.
    """
    try:
        owner = record.owner.encode("utf-8")
        trace = (record.traceparent or "").encode("utf-8")
        payload = record.payload.encode("utf-8")
        request_id = record.request_id.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"record {record.request_id!r} holds text that is not UTF-8: {exc}"
        ) from exc
    if len(owner) > MAX_OWNER_BYTES or len(trace) > 255:
        raise ValueError(f"record {record.request_id!r} has an over-long owner or traceparent")
    numbers = (record.due_at, record.attempts, record.fence, record.created_at, record.updated_at)
    if any(not 0 <= n <= MAX_COUNTER for n in numbers):
        raise ValueError(f"record {record.request_id!r} has a number outside 0..2**53")
    if (record.state is State.CLAIMED) != (record.lease_until is not None):
        raise ValueError(
            f"record {record.request_id!r}: a lease_until goes with CLAIMED and only with it"
        )
    if record.lease_until is not None and not 1 <= record.lease_until <= MAX_COUNTER:
        raise ValueError(f"record {record.request_id!r} has a lease_until outside 1..2**53")
    try:
        body = _BODY.pack(
            record.state.letter,
            record.due_at,
            record.lease_until or 0,
            record.attempts,
            record.fence,
            record.created_at,
            record.updated_at,
            len(owner),
            len(trace),
        )
    except struct.error as exc:
        raise ValueError(f"record {record.request_id!r} has a field out of range: {exc}") from exc
    version = VERSION
    if record.priority:
        if type(record.priority) is not int or not MIN_PRIORITY <= record.priority <= MAX_PRIORITY:
            raise ValueError(f"record {record.request_id!r} has a priority outside -100..100")
        version = VERSION_PRIORITY
    flags = (FLAG_HELD if record.held else 0) | (FLAG_GIVEN_BACK if record.given_back else 0)
    if record.held and record.state is not State.CLAIMED:
        raise ValueError(f"record {record.request_id!r}: only a CLAIMED record is held")
    if record.given_back and record.state is not State.PENDING:
        raise ValueError(f"record {record.request_id!r}: only a PENDING record is given back")
    if flags:
        version = VERSION_FLAGS
        body += _PRIORITY.pack(record.priority) + bytes((flags,))
    elif record.priority:
        body += _PRIORITY.pack(record.priority)
    body += owner + trace + payload
    # Version 2 binds its version byte into H too: a flipped version byte never decodes.
    bound = body if version == VERSION else version + body
    return version + checksum(request_id, bound) + body


def decode_record(request_id: str, raw: bytes) -> Record:
    """Decode and verify stored bytes; raise ``CorruptRecord`` naming the id if they fail."""
    version = raw[:1]
    if len(raw) < _HEAD or version not in (VERSION, VERSION_PRIORITY, VERSION_FLAGS):
        raise CorruptRecord(request_id, "unknown encoding version or truncated header")
    head, letter, due_at, lease, attempts, fence, created_at, updated_at, olen, tlen = (
        _LAYOUT.unpack_from(raw, 1)
    )
    start, priority, flags = _HEAD, 0, 0
    if version != VERSION:
        extra = 1 if version == VERSION_PRIORITY else 2
        if len(raw) < _HEAD + extra:
            raise CorruptRecord(request_id, "unknown encoding version or truncated header")
        (priority,) = _PRIORITY.unpack_from(raw, _HEAD)
        start += extra
        if not MIN_PRIORITY <= priority <= MAX_PRIORITY or (extra == 1 and not priority):
            raise CorruptRecord(request_id, f"priority {priority} is not -100..100 or is 0")
        if extra == 2:
            flags = raw[_HEAD + 1]
            if not flags or flags & ~(FLAG_HELD | FLAG_GIVEN_BACK):
                raise CorruptRecord(request_id, f"flags {flags} are not a known set")
    tail_at = start + olen
    if len(raw) < tail_at + tlen:
        raise CorruptRecord(request_id, "field lengths exceed the record")
    bound = raw[9:] if version == VERSION else version + raw[9:]
    if checksum(request_id.encode("utf-8", "surrogatepass"), bound) != head:
        raise CorruptRecord(request_id, "checksum mismatch")
    state = _BY_LETTER.get(letter)
    if state is None:
        raise CorruptRecord(request_id, f"unknown state letter {letter!r}")
    if (lease > 0) != (state is State.CLAIMED):
        raise CorruptRecord(request_id, "lease does not match state")
    held, given_back = bool(flags & FLAG_HELD), bool(flags & FLAG_GIVEN_BACK)
    if (held and state is not State.CLAIMED) or (given_back and state is not State.PENDING):
        raise CorruptRecord(request_id, "flags do not match state")
    try:
        owner = raw[start:tail_at].decode("utf-8")
        trace = raw[tail_at : tail_at + tlen].decode("utf-8")
        payload = raw[tail_at + tlen :].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRecord(request_id, f"text is not UTF-8: {exc}") from exc
    return Record(
        request_id=request_id,
        payload=payload,
        state=state,
        due_at=due_at,
        owner=owner,
        attempts=attempts,
        fence=fence,
        lease_until=lease or None,
        created_at=created_at,
        updated_at=updated_at,
        traceparent=trace or None,
        priority=priority,
        held=held,
        given_back=given_back,
    )
