"""A queue's flow limits: a rate (a token bucket) and a concurrency, held in Redis.

The claim scripts apply them (``lua/limits.lua``) in the same call that picks work; this
module reads and writes the limits key (``KEYS[12]``) through ``lua/limit.lua``.
docs/limits.md describes the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .runner import Runner

__all__ = ["LimitUse", "Limits", "Rate", "read_limits", "store_limits"]

#: Who wrote a queue's limits: the settings (every process writes them once) or an
#: operator (kept over the settings until reset).
SOURCES = ("settings", "operator")


@dataclass(frozen=True)
class Rate:
    """At most ``limit`` claims per ``period_ms``, ``burst`` of them at once after a lull."""

    limit: int
    period_ms: int
    burst: int

    def __post_init__(self) -> None:
        for name in ("limit", "period_ms", "burst"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"rate {name} must be an int of 1 or more, got {value!r}")

    def __str__(self) -> str:
        return f"{self.limit}/{self.period_ms / 1000:g}s burst {self.burst}"


@dataclass(frozen=True)
class Limits:
    """A queue's limits; ``None``: that limit is not set."""

    rate: Rate | None = None
    concurrency: int | None = None

    def __post_init__(self) -> None:
        if self.rate is not None and not isinstance(self.rate, Rate):
            raise TypeError(f"rate must be a Rate or None, got {self.rate!r}")
        value = self.concurrency
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ValueError(f"concurrency must be an int of 1 or more or None, got {value!r}")

    def __bool__(self) -> bool:
        return self.rate is not None or self.concurrency is not None


@dataclass(frozen=True)
class LimitUse:
    """A queue's limits as stored, and their use now."""

    limits: Limits
    #: ``"settings"``, ``"operator"``, or ``None`` when no limit is stored.
    source: str | None
    #: Tokens in the bucket now (``None``: no rate).
    tokens_left: float | None
    #: Records CLAIMED now: the slots a concurrency limit counts.
    slots_taken: int


def _int(value: Any) -> int | None:
    return None if value in (b"", "", None) else int(value)


def read_limits(runner: Runner) -> LimitUse:
    """Read a queue's limits and their use (one script call)."""
    reply = runner.run(runner.scripts.limit, ["read"])
    _, limit, period, burst, concurrency, source, left, taken = reply
    rate = None
    if _int(limit) is not None:
        rate = Rate(int(limit), int(period), int(burst))
    return LimitUse(
        Limits(rate, _int(concurrency)),
        source.decode() if source else None,
        float(left) if left else None,
        int(taken),
    )


def store_limits(runner: Runner, limits: Limits, source: str, *, force: bool) -> bool:
    """Store ``limits`` (empty: none); say whether they were written.

    ``force`` false keeps limits an operator stored; the same limits again write nothing.
    A rate kept across a change keeps its bucket, clamped to the new burst.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    rate = limits.rate
    args: list[Any] = [
        "set",
        rate.limit if rate else "",
        rate.period_ms if rate else "",
        rate.burst if rate else "",
        limits.concurrency if limits.concurrency is not None else "",
        source,
        "1" if force else "0",
    ]
    return int(runner.run(runner.scripts.limit, args)[0]) == 1


def take(runner: Runner, want: int) -> int:
    """Take up to ``want`` claims the limits allow now, their tokens spent (reference path)."""
    return int(runner.run(runner.scripts.limit, ["take", want])[0])


def refund(runner: Runner, unused: int) -> int | None:
    """Give back ``unused`` tokens; answer when the next claim may be made (server ms, -1:
    a freed slot wakes a worker), or ``None`` when the limits let one be made now."""
    answer = runner.run(runner.scripts.limit, ["refund", unused])[0]
    return None if answer in (b"", "") else int(answer)
