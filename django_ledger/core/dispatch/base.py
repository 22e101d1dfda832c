"""Dispatch records and the registry interface: what any engine stores and answers."""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar, Final, TypeAlias

from ..errors import LedgerError, LedgerUnavailable

__all__ = [
    "CorruptDispatch",
    "Dispatch",
    "DispatchRegistry",
    "DispatchUnavailable",
    "FireTime",
]

FireTime: TypeAlias = datetime | int | float
"""An aware ``datetime`` or seconds since the epoch; kept to whole seconds."""

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND: Final = timedelta(seconds=1)
_FIELDS: Final = ("key", "fire_time", "dispatched_at", "node_id", "status")


class DispatchUnavailable(LedgerUnavailable):
    """Redis could not be reached while reading or writing a dispatch record."""


class CorruptDispatch(LedgerError, ValueError):
    """Stored bytes are not a dispatch record."""


@dataclass(frozen=True, slots=True)
class Dispatch:
    """One dispatch of one fire of one cron key; times are aware UTC."""

    key: str
    fire_time: datetime
    dispatched_at: datetime
    node_id: str
    status: str

    def __post_init__(self) -> None:
        for name in ("key", "node_id", "status"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"Dispatch.{name} must be a str")
        for name in ("fire_time", "dispatched_at"):
            value = getattr(self, name)
            if not isinstance(value, datetime):
                raise TypeError(f"Dispatch.{name} must be a datetime")
            if value.utcoffset() != timedelta(0):
                raise ValueError(f"Dispatch.{name} must be an aware UTC datetime")

    def to_json(self) -> str:
        """Encode as the reference stores it: compact JSON, times in epoch seconds."""
        data: dict[str, object] = {name: getattr(self, name) for name in _FIELDS}
        for name in ("fire_time", "dispatched_at"):
            data[name] = _epoch_of(getattr(self, name))
        return json.dumps(data, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, data: str | bytes | bytearray) -> Dispatch:
        """Decode a stored record (extra fields are ignored).

        Raise ``CorruptDispatch`` if the bytes are not a record.
        """
        try:
            fields = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise CorruptDispatch(f"dispatch record is not JSON: {exc}") from exc
        if not isinstance(fields, dict):
            raise CorruptDispatch("dispatch record is not a JSON object")
        missing = [name for name in _FIELDS if name not in fields]
        if missing:
            raise CorruptDispatch(f"dispatch record lacks {', '.join(missing)}")
        for name in ("key", "node_id", "status"):
            if not isinstance(fields[name], str):
                raise CorruptDispatch(f"dispatch record field {name!r} is not text")
        values = {name: fields[name] for name in _FIELDS}
        for name in ("fire_time", "dispatched_at"):
            value = values[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise CorruptDispatch(f"dispatch record field {name!r} is not an int")
            try:
                values[name] = _datetime_of(value)
            except ValueError as exc:
                raise CorruptDispatch(f"dispatch record field {name!r}: {exc}") from exc
        return cls(**values)


class DispatchRegistry(ABC):
    """Record dispatches of cron fires, each kept for ``ttl`` seconds."""

    DEFAULT_TTL: ClassVar[int] = 7 * 24 * 60 * 60
    HISTORY_BOUND: ClassVar[int] = 1000
    """Fire times indexed per key for ``history``; older ones are dropped."""

    def __init__(self, ttl: int = DEFAULT_TTL) -> None:
        self.ttl = _check_ttl(ttl)

    @abstractmethod
    def log_dispatch(
        self, key: str, fire_time: FireTime, node_id: str, status: str = "dispatched"
    ) -> Dispatch:
        """Store (or overwrite) the record of this fire and return it."""

    @abstractmethod
    def find_dispatch(self, key: str, fire_time: FireTime) -> Dispatch | None:
        """Return the record of this fire, or ``None`` if none is kept."""

    @abstractmethod
    def claim_dispatch(self, key: str, fire_time: FireTime, node_id: str) -> bool:
        """Record ``node_id`` as this fire's dispatcher unless one is; say if it won."""

    @abstractmethod
    def history(self, key: str, limit: int = 50) -> list[Dispatch]:
        """Return up to ``limit`` kept records of ``key``, newest fire first."""

    def is_dispatched(self, key: str, fire_time: FireTime) -> bool:
        """Say whether this fire has a record (the reference's ``dispatched?``)."""
        return self.find_dispatch(key, fire_time) is not None

    def _check_limit(self, limit: int) -> int:
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise TypeError(f"limit must be an int, not {type(limit).__name__}")
        if not 1 <= limit <= self.HISTORY_BOUND:
            raise ValueError(f"limit must be between 1 and {self.HISTORY_BOUND}, not {limit}")
        return limit


def _new_record(key: str, fire_time: FireTime, node_id: str, status: str, now: float) -> Dispatch:
    return Dispatch(
        key=_check_text("key", key),
        fire_time=_datetime_of(_epoch(fire_time)),
        dispatched_at=_datetime_of(math.floor(now)),
        node_id=_check_text("node_id", node_id),
        status=_check_text("status", status),
    )


def _check_text(name: str, value: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{name} must not be empty or only whitespace")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{name} is not valid Unicode (lone surrogate?): {value!r}") from exc
    return value


def _check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str):
        raise TypeError(f"namespace must be a str, not {type(namespace).__name__}")
    if not namespace or any(c.isspace() or c in "{}" for c in namespace):
        raise ValueError(
            f"namespace must be non-empty, without whitespace or braces: {namespace!r}"
        )
    return namespace


def _check_ttl(ttl: int) -> int:
    if isinstance(ttl, bool) or not isinstance(ttl, int):
        raise TypeError(f"ttl must be an int number of seconds, not {type(ttl).__name__}")
    if ttl <= 0:
        raise ValueError(f"ttl must be positive, not {ttl}")
    return ttl


def _epoch(fire_time: FireTime) -> int:
    """Return whole epoch seconds (floored, as Ruby's ``Time#to_i``) of a fire time."""
    if isinstance(fire_time, datetime):
        if fire_time.utcoffset() is None:
            raise ValueError(
                f"fire_time must be timezone-aware; naive datetime {fire_time!r} is "
                "ambiguous (use datetime.now(timezone.utc) or attach a tzinfo)"
            )
        return _epoch_of(fire_time)
    if isinstance(fire_time, bool) or not isinstance(fire_time, (int, float)):
        raise TypeError(
            f"fire_time must be an aware datetime or epoch seconds, not {type(fire_time).__name__}"
        )
    if not math.isfinite(fire_time):
        raise ValueError(f"fire_time must be finite, not {fire_time}")
    epoch = math.floor(fire_time)
    _datetime_of(epoch)  # refuse an epoch no record could be read back with
    return epoch


def _epoch_of(moment: datetime) -> int:
    return (moment - _EPOCH) // _SECOND


def _datetime_of(epoch: int) -> datetime:
    try:
        return _EPOCH + timedelta(seconds=epoch)
    except OverflowError as exc:
        raise ValueError(f"epoch seconds {epoch} are out of datetime's range") from exc
