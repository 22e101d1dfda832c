"""Worker heartbeats in Redis: who is running, on which queues, doing what, since when.

Each worker writes one JSON document under ``{namespace}:worker:{worker_id}`` with an
expiry a few beats long, and scores its id in ``{namespace}:workers`` by the beat's time;
a worker that dies simply stops beating, and its entry expires and drops off the list.

A beat also flushes the worker's ``tally`` (its outcome counters, ``core/counters.py``)
at most once every ``counters.FLUSH_EVERY`` seconds, and a clean stop flushes what is
left, so the counters cost no round trip per task. The same flush samples the depth of
the worker's queues (``counters.Depth``); ``counters.on_sample`` hears each sample. ``Heartbeats(..., counters=False)``
(the ``LEDGER['COUNTERS']`` setting, or ``ledger_worker --no-counters``) keeps none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..counters import Counters, Tally
from ..transport import text_of
from .epoch import DataLoss, Epochs, EpochWatch

__all__ = ["Heartbeats", "WorkerInfo"]


@dataclass
class WorkerInfo:
    """What one heartbeat says of a worker."""

    worker_id: str
    host: str
    pid: int
    queues: list[str]
    concurrency: int
    started_at: int
    beat_at: int = 0
    #: When the main loop last turned (epoch ms): a beat while the loop runs a task
    #: itself, renewed, counts as a turn. A loop stuck elsewhere falls behind ``beat_at``.
    loop_at: int = 0
    processed: int = 0
    failed: int = 0
    retried: int = 0
    lost: int = 0
    #: What runs now: one dict per job (id, queue, name, attempt, since in epoch ms).
    running: list[dict[str, Any]] = field(default_factory=list)
    state: str = "running"
    #: Times this worker found Redis had lost the ledger's data, and the last (epoch ms).
    data_losses: int = 0
    data_lost_at: int | None = None

    def to_json(self) -> str:
        return json.dumps(self.__dict__, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: bytes | str) -> WorkerInfo:
        data = json.loads(raw)
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


class Heartbeats:
    """Write and read worker heartbeats for one namespace."""

    def __init__(self, redis: Any, namespace: str, counters: bool = True) -> None:
        self.redis = redis
        self.namespace = namespace
        self.index_key = f"{namespace}:workers"
        #: What this worker counted since its last flush (``worker/outcomes.py`` adds);
        #: with ``counters=False`` it counts nothing and no counters key is written.
        self.tally = Tally(enabled=counters)
        self.counters = Counters(redis, namespace)
        #: The queues of the last beat: each flush samples their depth (``Counters``).
        self._queues: list[str] = []
        #: The namespace's epoch, read with each beat (``epoch.py``): a data loss shows.
        self.epochs = Epochs(redis, namespace)
        self.watch = EpochWatch(self.epochs)

    def key(self, worker_id: str) -> str:
        return f"{self.namespace}:worker:{worker_id}"

    def beat(self, info: WorkerInfo, ttl_s: float) -> DataLoss | None:
        """Write ``info``; it expires after ``ttl_s`` unless the next beat comes first.

        The same round trip reads the namespace's epoch: returns the data loss it shows
        (Redis lost what it held since this worker's last beat), if any.
        """
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(self.epochs.key)
        pipe.set(self.key(info.worker_id), info.to_json(), px=max(1, int(ttl_s * 1000)))
        pipe.zadd(self.index_key, {info.worker_id: info.beat_at})
        raw = pipe.execute()[0]
        loss = self.watch.seen(raw, info.beat_at, info.worker_id)
        self._queues = list(info.queues)
        self.counters.flush(self.tally, queues=self._queues)
        return loss

    def forget(self, worker_id: str) -> None:
        """Remove a worker that stopped cleanly, flushing its last counts first."""
        try:
            self.counters.flush(self.tally, force=True, queues=self._queues)
        finally:
            pipe = self.redis.pipeline(transaction=False)
            pipe.delete(self.key(worker_id))
            pipe.zrem(self.index_key, worker_id)
            pipe.execute()

    def live(self) -> list[WorkerInfo]:
        """Every worker whose heartbeat has not expired, most recently started first."""
        ids = [text_of(m) for m in self.redis.zrange(self.index_key, 0, -1)]
        if not ids:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for worker_id in ids:
            pipe.get(self.key(worker_id))
        found, gone = [], []
        for worker_id, raw in zip(ids, pipe.execute(), strict=True):
            if raw is None:
                gone.append(worker_id)
                continue
            try:
                found.append(WorkerInfo.from_json(raw))
            except (ValueError, TypeError):
                gone.append(worker_id)
        if gone:
            self.redis.zrem(self.index_key, *gone)
        return sorted(found, key=lambda info: -info.started_at)
