"""Records as the import and export format spells them (one JSON object per line)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from .records import Record, State, id_problem, owner_problem, traceparent_problem
from .timing import instant_ms

__all__ = ["FIELDS", "prepare_import", "record_to_fields"]

#: Every field of the format, in the order ``ledger_export`` writes them.
FIELDS = (
    "request_id",
    "payload",
    "state",
    "due_at",
    "owner",
    "attempts",
    "fence",
    "lease_until",
    "created_at",
    "updated_at",
    "traceparent",
    "priority",
)
_REQUIRED = ("request_id", "payload", "state", "due_at")


def record_to_fields(record: Record) -> dict[str, Any]:
    """Spell ``record`` in the import format, every field present."""
    fields = {name: getattr(record, name) for name in FIELDS}
    fields["state"] = record.state.value
    return fields


#: The largest fence an import takes: above what a fence counter seeded from the server
#: clock in microseconds gives for a century, and far below the format's 2**53, so a
#: fence can grow by a claim for ever after.
MAX_IMPORTED_FENCE = 2**52


def _count(
    fields: Mapping[str, Any], name: str, default: int, top: int = 2**32, shown: str = "2**32"
) -> int:
    value = fields.get(name)
    if value is None:
        return default
    # Far below the format's 2**53, so a count can grow by a claim for ever after.
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= top:
        raise ValueError(f"{name} must be a whole number from 0 to {shown}, got {value!r}")
    return value


def _instant(fields: Mapping[str, Any], name: str, default: int) -> int:
    value = fields.get(name)
    if value is None:
        return default
    if not isinstance(value, int | datetime) or isinstance(value, bool):
        raise ValueError(f"{name} must be epoch milliseconds, got {value!r}")
    return instant_ms(value, name)


def prepare_import(
    fields: Mapping[str, Any], now: int, max_payload_bytes: int | None = None
) -> tuple[Record, frozenset[str]]:
    """Validate one record given as fields and fill what it leaves out.

    Return the record and the names of the fields that were given (an existing record
    must agree on exactly those). Raise ``ValueError`` naming the first bad field.
    """
    if not isinstance(fields, Mapping):
        raise ValueError(f"a record must be an object of fields, got {type(fields).__name__}")
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s): {', '.join(map(str, unknown))}")
    missing = [name for name in _REQUIRED if fields.get(name) is None]
    if missing:
        raise ValueError(f"missing field(s): {', '.join(missing)}")
    request_id = fields["request_id"]
    if not isinstance(request_id, str) or id_problem(request_id):
        raise ValueError(f"request_id is not usable ({_why(request_id, id_problem)})")
    payload = fields["payload"]
    if not isinstance(payload, str):
        raise ValueError(f"payload must be a string, got {type(payload).__name__}")
    state = fields["state"]
    if isinstance(state, str):
        try:
            state = State[state.upper()]
        except KeyError:
            raise ValueError(
                f"state must be one of {', '.join(s.value for s in State)}, got {state!r}"
            ) from None
    if not isinstance(state, State):
        raise ValueError(f"state must be a state name, got {state!r}")
    owner = fields.get("owner") or ""
    if not isinstance(owner, str) or owner_problem(owner, empty_ok=True):
        raise ValueError(f"owner is not usable ({_why(owner, owner_problem)})")
    if state is State.CLAIMED and not owner:
        raise ValueError("a CLAIMED record needs an owner")
    traceparent = fields.get("traceparent")
    if traceparent is not None and (
        not isinstance(traceparent, str) or traceparent_problem(traceparent)
    ):
        raise ValueError(f"traceparent is not W3C trace context: {traceparent!r}")
    due_at = _instant(fields, "due_at", now)
    attempts = _count(fields, "attempts", 1 if state is State.CLAIMED else 0)
    if state is State.CLAIMED and attempts < 1:
        # A claim is an attempt (claiming counts it): given back, it would count below 0.
        raise ValueError(f"a CLAIMED record has made at least 1 attempt, not {attempts}")
    fence = _count(fields, "fence", attempts, MAX_IMPORTED_FENCE, "2**52")
    lease_until: int | None = None
    if state is State.CLAIMED:
        # Without a lease of its own, an imported claim is expired: repair gives it back.
        lease_until = _instant(fields, "lease_until", now)
    elif fields.get("lease_until") is not None:
        raise ValueError(f"only a CLAIMED record has a lease_until, not a {state.value} one")
    created_at = _instant(fields, "created_at", now)
    updated_at = _instant(fields, "updated_at", now)
    priority = fields.get("priority", 0)
    if priority is None:
        priority = 0
    if isinstance(priority, bool) or not isinstance(priority, int) or not -100 <= priority <= 100:
        raise ValueError(f"priority must be an int from -100 to 100, got {priority!r}")
    record = Record(
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
        traceparent=traceparent,
        priority=priority,
    )
    try:
        size = len(payload.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("payload is not valid Unicode text (it holds a lone surrogate)") from None
    if max_payload_bytes is not None and size > max_payload_bytes:
        raise ValueError(f"payload is {size} bytes, over the queue's limit of {max_payload_bytes}")
    given = frozenset(name for name in fields if name != "request_id" and fields[name] is not None)
    return record, given


def _why(value: object, check: Any) -> str:
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    return str(check(value))
