"""Argument checks the ledger's operations share: each raises TypeError or ValueError."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TypeAlias

from .records import MAX_PRIORITY, MIN_PRIORITY, State
from .results import Claim
from .timing import duration_ms

__all__ = [
    "RenewItem",
    "SettleItem",
    "Work",
    "check_claim",
    "check_name",
    "check_priority",
    "positive_int",
    "renew_work",
    "settle_target",
    "settle_work",
    "work_size",
]

#: What ``settle_many`` takes: (claim, state[, delay[, result]]).
SettleItem: TypeAlias = (
    tuple[Claim, State]
    | tuple[Claim, State, timedelta | float]
    | tuple[Claim, State, timedelta | float, str | bytes | None]
)
#: What ``renew_many`` takes: (claim, lease[, started]).
RenewItem: TypeAlias = tuple[Claim, timedelta | float] | tuple[Claim, timedelta | float, bool]
#: One checked settlement for the scripts: claim, target letter, milliseconds, result bytes.
Work: TypeAlias = tuple[Claim, str, int, bytes]

_NAME = re.compile(r"[^\s{}\x00-\x1f\x7f]{1,100}")


def check_name(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    if not _NAME.fullmatch(value):
        raise ValueError(
            f"{what} {value!r} is not usable: 1 to 100 characters, no whitespace, "
            "no braces, no control characters"
        )
    return value


def check_claim(claim: object) -> None:
    """Refuse anything but a Claim whose identity fields have their types, before any write.

    The values need no check: a claim the ledger did not hand out matches no record and
    answers LOST.
    """
    if claim.__class__ is not Claim and not isinstance(claim, Claim):
        raise TypeError(f"expected a Claim, not {type(claim).__name__}")
    if not (
        isinstance(claim.request_id, str)
        and isinstance(claim.owner, str)
        and type(claim.fence) is int
    ):
        raise TypeError("a Claim's request_id and owner must be str, its fence an int")


def settle_target(state: object) -> str:
    """Return the settle script's letter for ``state`` (identity tests: enum hashing is slow)."""
    if state is State.COMPLETED:
        return "K"
    if state is State.FAILED:
        return "F"
    if state is State.PENDING:
        return "P"
    if state is State.CLAIMED:
        return "S"  # still claimed, its work started: the lease renewed by the delay
    if not isinstance(state, State):
        raise TypeError(f"state must be a State, not {type(state).__name__}")
    raise ValueError(
        f"a claim settles as COMPLETED, FAILED or PENDING (or CLAIMED: started), not {state.value}"
    )


def positive_int(value: object, name: str, *, upper: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    if value < 1 or (upper is not None and value > upper):
        bound = f" and at most {upper}" if upper is not None else ""
        raise ValueError(f"{name} must be at least 1{bound}, got {value}")
    return value


def settle_work(item: object) -> Work:
    """Check one ``settle_many`` item and return it as the scripts take it."""
    if item.__class__ is tuple and len(item) == 2:  # (claim, state): a worker's every call
        claim, state = item
        check_claim(claim)
        target = settle_target(state)
        if target == "S":
            raise ValueError("a claim marked started (CLAIMED) needs its new lease as the delay")
        return (claim, target, 0, b"")
    if not isinstance(item, tuple | list) or not 2 <= len(item) <= 4:
        raise TypeError("each item must be (claim, state[, delay[, result]])")
    claim, state = item[0], item[1]
    delay = item[2] if len(item) > 2 else 0
    result = item[3] if len(item) > 3 else None
    check_claim(claim)
    if result is None:
        data = b""
    elif isinstance(result, str):
        data = result.encode("utf-8")
    elif isinstance(result, bytes):
        data = result
    else:
        raise TypeError(f"result must be str, bytes or None, not {type(result).__name__}")
    target = settle_target(state)
    # A started claim's "delay" is its new lease: it must be some time.
    ms = duration_ms(delay, "lease" if target == "S" else "delay", positive=target == "S")
    return (claim, target, ms, data)


def renew_work(item: object) -> Work:
    """Check one ``renew_many`` item: a renewal (``C``), or with ``started`` a start (``S``)."""
    if not isinstance(item, tuple | list) or not 2 <= len(item) <= 3:
        raise TypeError("each item must be a (claim, lease) pair or (claim, lease, started)")
    claim = item[0]
    check_claim(claim)
    started = item[2] if len(item) == 3 else False
    if not isinstance(started, bool):
        raise TypeError(f"started must be a bool, not {type(started).__name__}")
    return (claim, "S" if started else "C", duration_ms(item[1], "lease", positive=True), b"")


def work_size(item: Work) -> int:
    """The bytes one settlement adds to a transport batch."""
    return len(item[0].request_id) + len(item[0].owner) + len(item[3])


def check_priority(priority: object) -> int:
    """Refuse a priority that is not an int from -100 to 100."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"priority must be an int, not {type(priority).__name__}")
    if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
        raise ValueError(f"priority must be from {MIN_PRIORITY} to {MAX_PRIORITY}, got {priority}")
    return priority
