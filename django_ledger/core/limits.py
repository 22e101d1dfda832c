"""A queue's flow limits: a rate (a token bucket) and a concurrency, held in Redis.

The claim scripts apply them (``lua/lib/limits_accounting.lua``, per key
``lua/lib/keyed_claim.lua``) in the same call that picks work; this module reads and
writes the limits key (``QueueKeys.limits``, ``KEYS.limits`` in Lua) through
``lua/scripts/limits_control.lua``, and computes a request's key from its payload.
docs/limits.md describes the model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .runner import Runner

__all__ = [
    "MAX_LIMIT",
    "MAX_PERIOD_MS",
    "KeyLimits",
    "KeyUse",
    "LimitUse",
    "Limits",
    "Rate",
    "check_key_path",
    "key_of",
    "read_limits",
    "store_key_limits",
    "store_limits",
]

#: A KEY: a dotted path into the payload's JSON document (``kwargs.tenant_id``,
#: ``args.0``); a segment of digits indexes a list.
_KEY_PATH = re.compile(r"[^.\s]+(?:\.[^.\s]+)*")
#: A key's most UTF-8 bytes; a longer one (or one with a control character) is refused.
MAX_KEY_BYTES = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")

#: Who wrote a queue's limits: the settings (every process writes them once) or an
#: operator (kept over the settings until reset).
SOURCES = ("settings", "operator")
#: The largest ``LIMIT``, ``BURST`` and ``CONCURRENCY``: every number the claim scripts
#: count with stays exact in Lua (whose numbers are doubles).
MAX_LIMIT = 1_000_000_000
#: The longest ``PERIOD`` of a rate, in ms (366 days, as the settings allow).
MAX_PERIOD_MS = 366 * 24 * 3600 * 1000


@dataclass(frozen=True)
class Rate:
    """At most ``limit`` claims per ``period_ms``, ``burst`` of them at once after a lull."""

    limit: int
    period_ms: int
    burst: int

    def __post_init__(self) -> None:
        for name, most in (
            ("limit", MAX_LIMIT),
            ("period_ms", MAX_PERIOD_MS),
            ("burst", MAX_LIMIT),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
                raise ValueError(f"rate {name} must be an int from 1 to {most:,}, got {value!r}")

    def __str__(self) -> str:
        return f"{self.limit}/{self.period_ms / 1000:g}s burst {self.burst}"


def check_key_path(path: object) -> str:
    """Return ``path`` if it is a usable KEY (a dotted path), else raise ``ValueError``."""
    if not isinstance(path, str) or not _KEY_PATH.fullmatch(path) or len(path) > 200:
        raise ValueError(
            f"a KEY is a dotted path into the task's arguments, e.g. 'kwargs.tenant_id' or "
            f"'args.0', got {path!r}"
        )
    return path


def key_of(path: str, payload: str) -> str | None:
    """The key of a request under KEY ``path``: the text of the value the path names in
    the payload's JSON document ('' when the payload has none), or ``None`` when the value
    cannot be a key (over ``MAX_KEY_BYTES``, or a control character)."""
    try:
        value: Any = json.loads(payload)
    except ValueError:
        return ""
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdecimal() and int(part) < len(value):
            value = value[int(part)]
        else:
            return ""
    if isinstance(value, str):
        key = value
    else:
        key = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES or _CONTROL.search(key):
        return None
    return key


@dataclass(frozen=True)
class Limits:
    """A queue's limits; ``None``: that limit is not set. With ``key`` (a KEY path) the
    rate and the concurrency hold per key, and the keys take turns (fair share)."""

    rate: Rate | None = None
    concurrency: int | None = None
    key: str | None = None

    def __post_init__(self) -> None:
        if self.rate is not None and not isinstance(self.rate, Rate):
            raise TypeError(f"rate must be a Rate or None, got {self.rate!r}")
        value = self.concurrency
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_LIMIT
        ):
            raise ValueError(
                f"concurrency must be None or an int from 1 to {MAX_LIMIT:,}, got {value!r}"
            )
        if self.key is not None:
            check_key_path(self.key)

    def __bool__(self) -> bool:
        return self.rate is not None or self.concurrency is not None or self.key is not None


@dataclass(frozen=True)
class KeyLimits:
    """One key's limits of its own, in a queue with a KEY: each part set (the rate, the
    concurrency) replaces the queue's for that key; a part not set is the queue's."""

    key: str
    limits: Limits
    #: ``"settings"`` or ``"operator"``: who wrote them (as the queue's limits).
    source: str

    def over(self, queue: Limits) -> Limits:
        """The key's limits in full: its own parts over the queue's."""
        own = self.limits
        return Limits(
            own.rate if own.rate is not None else queue.rate,
            own.concurrency if own.concurrency is not None else queue.concurrency,
            queue.key,
        )


@dataclass(frozen=True)
class KeyUse:
    """One key's use of its limits, in a queue with a KEY."""

    key: str
    #: Its due records waiting in the pool (held by its limits, or not yet reached).
    due: int
    #: Its records CLAIMED now (counted under a concurrency only, else 0).
    slots_taken: int
    #: Tokens in its bucket now (``None``: no rate).
    tokens_left: float | None


@dataclass(frozen=True)
class LimitUse:
    """A queue's limits as stored, and their use now."""

    limits: Limits
    #: ``"settings"``, ``"operator"``, or ``None`` when no limit is stored.
    source: str | None
    #: Tokens in the bucket now (``None``: no rate).
    tokens_left: float | None
    #: Records CLAIMED now: the slots a concurrency limit counts (with a KEY: all keys').
    slots_taken: int
    #: PENDING records due now (the ready index).
    due_now: int = 0
    #: Claims the limits allow now (``None``: no bound; with a KEY, per key: see ``keys``).
    room: int | None = None
    #: With a KEY: how many keys have due records in their turn, and the first of them.
    keys_waiting: int = 0
    keys: tuple[KeyUse, ...] = field(default_factory=tuple)
    #: With a KEY: the keys with limits of their own, by key.
    key_limits: tuple[KeyLimits, ...] = field(default_factory=tuple)

    def limits_of(self, key: str) -> Limits:
        """The limits ``key`` claims under: its own parts over the queue's."""
        for own in self.key_limits:
            if own.key == key:
                return own.over(self.limits)
        return self.limits

    @property
    def held(self) -> int:
        """Due records the limits hold now (with a KEY: those of keys with no room)."""
        if self.limits.key is not None:
            return sum(k.due for k in self.keys if self._key_full(k))
        return self.due_now if self.room == 0 else 0

    def _key_full(self, use: KeyUse) -> bool:
        limits = self.limits_of(use.key)
        if limits.concurrency is not None and use.slots_taken >= limits.concurrency:
            return True
        return use.tokens_left is not None and use.tokens_left < 1


def _int(value: Any) -> int | None:
    return None if value in (b"", "", None) else int(value)


def read_limits(runner: Runner, keys: int = 20) -> LimitUse:
    """Read a queue's limits and their use, with the first ``keys`` keys in turn (one
    script call)."""
    reply = runner.run(runner.scripts.limits_control, ["read", keys])
    _, limit, period, burst, concurrency, source, left, taken, key = reply[:9]
    waiting, due_now, room = reply[9:12]
    rate = None
    if _int(limit) is not None:
        rate = Rate(int(limit), int(period), int(burst))
    rows = tuple(
        KeyUse(
            reply[i].decode("utf-8"),
            int(reply[i + 1]),
            int(reply[i + 2]),
            float(reply[i + 3]) if reply[i + 3] else None,
        )
        for i in range(12, len(reply), 4)
    )
    return LimitUse(
        Limits(rate, _int(concurrency), key.decode("utf-8") if key else None),
        source.decode() if source else None,
        float(left) if left else None,
        int(taken),
        int(due_now),
        _int(room),
        int(waiting),
        rows,
        read_key_limits(runner) if key else (),
    )


def read_key_limits(runner: Runner) -> tuple[KeyLimits, ...]:
    """Every key's limits of its own (``Ledger.set_key_limits``), by key."""
    reply = runner.run(runner.scripts.limits_control, ["keylist"])
    found = []
    for i in range(0, len(reply), 6):
        limit, period, burst, concurrency = (_int(v) for v in reply[i + 1 : i + 5])
        rate = Rate(limit, period, burst) if limit is not None else None  # type: ignore[arg-type]
        own = Limits(rate, concurrency)
        found.append(KeyLimits(reply[i].decode("utf-8"), own, reply[i + 5].decode()))
    return tuple(sorted(found, key=lambda k: k.key))


def store_key_limits(
    runner: Runner, key: str, limits: Limits | None, source: str, *, force: bool
) -> bool:
    """Store ``key``'s limits of its own (``None`` or ``Limits()``: remove them, the key
    then claims under the queue's); say whether they were written. ``force`` false keeps
    those an operator stored; the same limits again write nothing."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    if not isinstance(key, str) or not key:
        raise ValueError(f"a key's limits need a key, got {key!r}")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES or _CONTROL.search(key):
        raise ValueError(f"{key!r} cannot be a key (too long, or a control character)")
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError(f"limits must be a Limits or None, got {limits!r}")
    if limits is not None and limits.key is not None:
        raise ValueError("a key's limits have no KEY of their own (the queue's KEY holds)")
    args = ["keyset", key, *_numbers(limits or Limits()), source, "1" if force else "0"]
    return int(runner.run(runner.scripts.limits_control, args)[0]) == 1


def store_limits(runner: Runner, limits: Limits, source: str, *, force: bool) -> bool:
    """Store ``limits`` (empty: none); say whether they were written.

    ``force`` false keeps limits an operator stored; the same limits again write nothing.
    A rate kept across a change keeps its bucket, clamped to the new burst.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, got {source!r}")
    args = ["set", *_numbers(limits), source, "1" if force else "0", limits.key or ""]
    return int(runner.run(runner.scripts.limits_control, args)[0]) == 1


def _numbers(limits: Limits) -> list[Any]:
    """The rate's limit, period and burst and the concurrency, as the script takes them
    ('' for what is not set)."""
    rate = limits.rate
    numbers = [rate.limit, rate.period_ms, rate.burst] if rate else ["", "", ""]
    return [*numbers, limits.concurrency if limits.concurrency is not None else ""]
