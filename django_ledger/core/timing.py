"""Durations and instants as the ledger takes them."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

__all__ = ["MAX_DURATION_MS", "duration_ms", "instant_ms"]

#: The longest delay, lease or retention the ledger accepts: about 100 years.
MAX_DURATION_MS = 100 * 366 * 24 * 3600 * 1000


def duration_ms(value: object, name: str, *, positive: bool = False) -> int:
    """Turn a ``timedelta`` or a number of seconds into whole milliseconds.

    Raise ``TypeError`` for other types and ``ValueError`` for negative, non-finite or
    absurdly long durations (and for zero when ``positive``).
    """
    if value.__class__ is int and 0 <= value <= MAX_DURATION_MS // 1000:
        ms = value * 1000
    elif isinstance(value, timedelta):
        ms = value // timedelta(milliseconds=1)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        # Bounds before isfinite: an int too large for a float would overflow there.
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name} must be finite, got {value!r}")
        if abs(value) > MAX_DURATION_MS // 1000:
            raise ValueError(f"{name} must be at most 100 years, got {value!r} seconds")
        ms = round(value * 1000)
    else:
        raise TypeError(
            f"{name} must be a timedelta or a number of seconds, not {type(value).__name__}"
        )
    if ms < 0:
        raise ValueError(f"{name} must not be negative, got {value!r}")
    if positive and ms == 0:
        raise ValueError(f"{name} must be at least 1 ms, got {value!r}")
    if ms > MAX_DURATION_MS:
        raise ValueError(f"{name} must be at most 100 years, got {value!r}")
    return int(ms)


def instant_ms(value: object, name: str) -> int:
    """Turn an aware ``datetime`` or epoch milliseconds (int) into epoch milliseconds."""
    if isinstance(value, datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"{name} must be an aware datetime (naive datetimes are ambiguous)")
        return int(
            (value.astimezone(UTC) - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(milliseconds=1)
        )
    if isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value <= 2**53:
            raise ValueError(f"{name} must be between 0 and 2**53 ms, got {value}")
        return value
    raise TypeError(
        f"{name} must be an aware datetime or epoch milliseconds, not {type(value).__name__}"
    )
