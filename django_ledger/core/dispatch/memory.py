"""The in-memory twin of the dispatch registry, for tests and single-process use."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import ClassVar

from .base import Dispatch, DispatchRegistry, FireTime, _check_text, _epoch, _epoch_of, _new_record

__all__ = ["MemoryDispatchRegistry"]


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
