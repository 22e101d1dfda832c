"""Remember which node dispatched which cron fire, for a while.

A port of Kaal's ``Kaal::Dispatch::RedisEngine``: one JSON record per
``(key, fire time)`` under ``{namespace}:cron_dispatch:{key}:{epoch seconds}``,
written with ``SET ... EX ttl`` (the reference's ``SETEX``) so that it expires.
On top of the reference, ``claim_dispatch`` lets many nodes race for one fire
with a single ``SET NX EX`` (exactly one wins), and ``history`` reads a per-key
index of fire times kept beside the records.

This module imports no Django: the Django layer builds a registry from settings.
"""

from __future__ import annotations

import json
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar, Final, TypeAlias, cast

from redis import Redis
from redis.client import Pipeline
from redis.cluster import ClusterPipeline, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from django_ledger.errors import LedgerError, LedgerUnavailable

__all__ = [
    "CorruptDispatch",
    "Dispatch",
    "DispatchRegistry",
    "DispatchUnavailable",
    "FireTime",
    "MemoryDispatchRegistry",
    "RedisDispatchRegistry",
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
        return json.dumps(
            {
                "key": self.key,
                "fire_time": _epoch_of(self.fire_time),
                "dispatched_at": _epoch_of(self.dispatched_at),
                "node_id": self.node_id,
                "status": self.status,
            },
            separators=(",", ":"),
            ensure_ascii=False,
        )

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
        times = []
        for name in ("fire_time", "dispatched_at"):
            value = fields[name]
            if isinstance(value, bool) or not isinstance(value, int):
                raise CorruptDispatch(f"dispatch record field {name!r} is not an int")
            try:
                times.append(_datetime_of(value))
            except ValueError as exc:
                raise CorruptDispatch(f"dispatch record field {name!r}: {exc}") from exc
        return cls(
            key=fields["key"],
            fire_time=times[0],
            dispatched_at=times[1],
            node_id=fields["node_id"],
            status=fields["status"],
        )


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


class RedisDispatchRegistry(DispatchRegistry):
    """Keep dispatch records in Redis as JSON strings that expire after ``ttl``.

    ``history`` reads the sorted set ``{namespace}:cron_dispatch_index:{key}``
    (fire epochs scored by themselves), written in the same round trip as each
    record, after it: the record is the truth and the index only points at it,
    so an index entry whose record has expired is skipped. On a standalone
    server the two writes run in one ``MULTI``; on a cluster they live in
    different slots and go in one non-transactional pipeline.
    """

    DEFAULT_TTL: ClassVar[int] = 7 * 24 * 60 * 60

    def __init__(
        self,
        redis: Redis | RedisCluster,
        namespace: str = "kaal",
        ttl: int = DEFAULT_TTL,
    ) -> None:
        super().__init__(ttl)
        self.redis = redis
        self.namespace = _check_namespace(namespace)
        self._transaction = not isinstance(redis, RedisCluster)

    def build_redis_key(self, key: str, fire_time: FireTime) -> str:
        """Return the key of this fire's record."""
        key = _check_text("key", key)
        return f"{self.namespace}:cron_dispatch:{key}:{_epoch(fire_time)}"

    def build_index_key(self, key: str) -> str:
        """Return the key of the sorted set indexing ``key``'s fire times."""
        key = _check_text("key", key)
        return f"{self.namespace}:cron_dispatch_index:{key}"

    def log_dispatch(
        self, key: str, fire_time: FireTime, node_id: str, status: str = "dispatched"
    ) -> Dispatch:
        record = _new_record(key, fire_time, node_id, status, time.time())
        with _unavailable("log a dispatch"):
            pipe = self.redis.pipeline(transaction=self._transaction)
            # SET EX is the reference's SETEX; redis-py 8 deprecates setex().
            pipe.set(self._record_key(record), record.to_json(), ex=self.ttl)
            self._index(pipe, record)
            pipe.execute()
        return record

    def find_dispatch(self, key: str, fire_time: FireTime) -> Dispatch | None:
        redis_key = self.build_redis_key(key, fire_time)
        with _unavailable("find a dispatch"):
            value = self.redis.get(redis_key)
        return None if value is None else _decode(redis_key, value)

    def claim_dispatch(self, key: str, fire_time: FireTime, node_id: str) -> bool:
        record = _new_record(key, fire_time, node_id, "dispatched", time.time())
        with _unavailable("claim a dispatch"):
            pipe = self.redis.pipeline(transaction=self._transaction)
            # The SET NX alone decides the winner. Losers re-add the same index
            # member, which changes nothing, so one round trip serves both.
            pipe.set(self._record_key(record), record.to_json(), nx=True, ex=self.ttl)
            self._index(pipe, record)
            won = pipe.execute()[0]
        return bool(won)

    def history(self, key: str, limit: int = 50) -> list[Dispatch]:
        index_key = self.build_index_key(key)
        limit = self._check_limit(limit)
        found: list[Dispatch] = []
        with _unavailable("read dispatch history"):
            members = cast(
                "list[bytes | str]",
                self.redis.zrevrange(index_key, 0, self.HISTORY_BOUND - 1),
            )
            # Expired records leave holes, so read pages until the limit is met.
            for start in range(0, len(members), limit):
                page = [_member_epoch(m) for m in members[start : start + limit]]
                record_keys = [self.build_redis_key(key, epoch) for epoch in page]
                pipe = self.redis.pipeline(transaction=False)
                for record_key in record_keys:
                    pipe.get(record_key)
                for record_key, value in zip(record_keys, pipe.execute(), strict=True):
                    if value is not None:
                        found.append(_decode(record_key, value))
                if len(found) >= limit:
                    break
        return found[:limit]

    def _record_key(self, record: Dispatch) -> str:
        return self.build_redis_key(record.key, record.fire_time)

    def _index(self, pipe: Pipeline | ClusterPipeline, record: Dispatch) -> None:
        epoch = _epoch_of(record.fire_time)
        index_key = self.build_index_key(record.key)
        pipe.zadd(index_key, {str(epoch): epoch})
        pipe.zremrangebyrank(index_key, 0, -(self.HISTORY_BOUND + 1))
        pipe.expire(index_key, self.ttl)


class MemoryDispatchRegistry(DispatchRegistry):
    """Keep dispatch records in this process, for tests and single-process use.

    Behaves as ``RedisDispatchRegistry`` does, with ``clock`` (seconds since the
    epoch) in place of the server's expiry clock. Safe to share between threads.
    """

    SWEEP_INTERVAL: ClassVar[float] = 60.0

    def __init__(
        self,
        ttl: int = DispatchRegistry.DEFAULT_TTL,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(ttl)
        self._clock = clock
        self._lock = threading.Lock()
        # (key, fire epoch) -> (record, expires at); key -> (fire epochs, expires at)
        self._records: dict[tuple[str, int], tuple[Dispatch, float]] = {}
        self._indexes: dict[str, tuple[set[int], float]] = {}
        self._next_sweep = 0.0

    def log_dispatch(
        self, key: str, fire_time: FireTime, node_id: str, status: str = "dispatched"
    ) -> Dispatch:
        with self._lock:
            now = self._clock()
            record = _new_record(key, fire_time, node_id, status, now)
            self._store(record, now)
        return record

    def find_dispatch(self, key: str, fire_time: FireTime) -> Dispatch | None:
        slot = (_check_text("key", key), _epoch(fire_time))
        with self._lock:
            return self._live(slot, self._clock())

    def claim_dispatch(self, key: str, fire_time: FireTime, node_id: str) -> bool:
        with self._lock:
            now = self._clock()
            record = _new_record(key, fire_time, node_id, "dispatched", now)
            won = self._live((record.key, _epoch_of(record.fire_time)), now) is None
            if won:
                self._store(record, now)
            else:
                self._touch_index(record, now)
            return won

    def history(self, key: str, limit: int = 50) -> list[Dispatch]:
        key = _check_text("key", key)
        limit = self._check_limit(limit)
        with self._lock:
            now = self._clock()
            epochs, expires_at = self._indexes.get(key, (set(), now))
            if expires_at <= now:
                return []
            found: list[Dispatch] = []
            for epoch in sorted(epochs, reverse=True):
                record = self._live((key, epoch), now)
                if record is not None:
                    found.append(record)
                    if len(found) == limit:
                        break
            return found

    def _live(self, slot: tuple[str, int], now: float) -> Dispatch | None:
        entry = self._records.get(slot)
        if entry is None:
            return None
        if entry[1] <= now:
            del self._records[slot]
            return None
        return entry[0]

    def _store(self, record: Dispatch, now: float) -> None:
        self._sweep(now)
        self._records[(record.key, _epoch_of(record.fire_time))] = (
            record,
            now + self.ttl,
        )
        self._touch_index(record, now)

    def _touch_index(self, record: Dispatch, now: float) -> None:
        epochs, expires_at = self._indexes.get(record.key, (set(), now))
        if expires_at <= now:
            epochs = set()
        epochs.add(_epoch_of(record.fire_time))
        if len(epochs) > self.HISTORY_BOUND:
            epochs.remove(min(epochs))
        self._indexes[record.key] = (epochs, now + self.ttl)

    def _sweep(self, now: float) -> None:
        # Expired entries are otherwise only dropped when read; sweep now and
        # then so a long-lived process does not keep them all.
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(float(self.ttl), self.SWEEP_INTERVAL)
        self._records = {s: e for s, e in self._records.items() if e[1] > now}
        self._indexes = {k: e for k, e in self._indexes.items() if e[1] > now}


@contextmanager
def _unavailable(doing: str) -> Iterator[None]:
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise DispatchUnavailable(f"Redis unavailable, could not {doing}: {exc}") from exc


def _new_record(key: str, fire_time: FireTime, node_id: str, status: str, now: float) -> Dispatch:
    return Dispatch(
        key=_check_text("key", key),
        fire_time=_datetime_of(_epoch(fire_time)),
        dispatched_at=_datetime_of(math.floor(now)),
        node_id=_check_text("node_id", node_id),
        status=_check_text("status", status),
    )


def _decode(redis_key: str, value: bytes | str) -> Dispatch:
    try:
        return Dispatch.from_json(value)
    except CorruptDispatch as exc:
        raise CorruptDispatch(f"{redis_key!r}: {exc}") from exc


def _member_epoch(member: bytes | str) -> int:
    return int(member.decode() if isinstance(member, bytes) else member)


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
