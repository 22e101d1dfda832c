"""The Redis engine of the dispatch registry: a port of Kaal's ``Kaal::Dispatch::RedisEngine``.

One JSON record per ``(key, fire time)`` under ``{namespace}:cron_dispatch:{key}:{epoch
seconds}``, written with ``SET ... EX ttl`` (the reference's ``SETEX``) so that it expires.
On top of the reference, ``claim_dispatch`` lets many nodes race for one fire with a
single ``SET NX EX`` (exactly one wins), and ``history`` reads a per-key index of fire
times kept beside the records.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

from redis import Redis
from redis.cluster import RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from .base import (
    CorruptDispatch,
    Dispatch,
    DispatchRegistry,
    DispatchUnavailable,
    FireTime,
    _check_namespace,
    _check_text,
    _epoch,
    _epoch_of,
    _new_record,
)

__all__ = ["RedisDispatchRegistry"]


class RedisDispatchRegistry(DispatchRegistry):
    """Keep dispatch records in Redis as JSON strings that expire after ``ttl``.

    ``history`` reads the sorted set ``{namespace}:cron_dispatch_index:{key}``
    (fire epochs scored by themselves), written in the same round trip as each
    record, after it: the record is the truth and the index only points at it,
    so an index entry whose record has expired is skipped. On a standalone
    server the two writes run in one ``MULTI``; on a cluster they live in
    different slots, so they are two steps (one non-transactional pipeline,
    sent to each slot's master): an error may leave the record written without
    its index entry, which only hides the fire from ``history``. A claim that
    raised may have won: the fire stays pending and the scheduler's next try,
    which loses the claim, admits it all the same (the ledger refuses a second
    copy).
    """

    def __init__(
        self,
        redis: Redis | RedisCluster,
        namespace: str = "kaal",
        ttl: int = DispatchRegistry.DEFAULT_TTL,
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
        self._write(record, "log a dispatch", only_new=False)
        return record

    def find_dispatch(self, key: str, fire_time: FireTime) -> Dispatch | None:
        redis_key = self.build_redis_key(key, fire_time)
        with _unavailable("find a dispatch"):
            value = self.redis.get(redis_key)
        return None if value is None else _decode(redis_key, value)

    def claim_dispatch(self, key: str, fire_time: FireTime, node_id: str) -> bool:
        record = _new_record(key, fire_time, node_id, "dispatched", time.time())
        return self._write(record, "claim a dispatch", only_new=True)

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

    def _write(self, record: Dispatch, doing: str, *, only_new: bool) -> bool:
        """Write ``record`` (``only_new``: unless one is there) and index its fire time, in
        one round trip; say whether the record was written."""
        epoch = _epoch_of(record.fire_time)
        index_key = self.build_index_key(record.key)
        with _unavailable(doing):
            pipe = self.redis.pipeline(transaction=self._transaction)
            # SET EX is the reference's SETEX; redis-py 8 deprecates setex(). With NX, the
            # SET alone decides a claim's winner. Losers re-add the same index member,
            # which changes nothing, so one round trip serves both.
            record_key = self.build_redis_key(record.key, record.fire_time)
            pipe.set(record_key, record.to_json(), nx=only_new, ex=self.ttl)
            pipe.zadd(index_key, {str(epoch): epoch})
            pipe.zremrangebyrank(index_key, 0, -(self.HISTORY_BOUND + 1))
            pipe.expire(index_key, self.ttl)
            return bool(pipe.execute()[0])


def _decode(redis_key: str, value: bytes | str) -> Dispatch:
    try:
        return Dispatch.from_json(value)
    except CorruptDispatch as exc:
        raise CorruptDispatch(f"{redis_key!r}: {exc}") from exc


def _member_epoch(member: bytes | str) -> int:
    return int(member.decode() if isinstance(member, bytes) else member)


@contextmanager
def _unavailable(doing: str) -> Iterator[None]:
    try:
        yield
    except (RedisConnectionError, RedisTimeoutError) as exc:
        raise DispatchUnavailable(f"Redis unavailable, could not {doing}: {exc}") from exc
