"""The namespace's epoch: how workers notice that Redis lost the ledger's data.

Redis restarted without persistence (or flushed, or failed over to a replica that had
nothing) holds none of the records, results, heartbeats or fence counters written
before. Nothing in Redis can tell such an empty server from a new one, so the workers
remember: the first beat writes an epoch document under ``{namespace}:epoch`` (an id and
when it began) and each worker keeps the id it saw. A beat that finds the document gone,
or another id there, has seen the data lost: it begins a new epoch that says so (the
epoch lost, when and by which worker it was noticed), or reads the one another worker
began first. ``check --deploy``, the Workers page and the metrics read it from there.

Fences need no epoch: a missing fence counter starts at the server clock in
microseconds (``indexes.lua``), above every fence an earlier counter gave.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["DataLoss", "Epoch", "Epochs"]


@dataclass(frozen=True)
class DataLoss:
    """What a worker noticed: the epoch whose data Redis lost, when, by whom."""

    previous: str
    #: Epoch ms, by the clock of the worker that noticed it.
    noticed_at: int
    noticed_by: str


@dataclass(frozen=True)
class Epoch:
    """One epoch of a namespace's data in Redis."""

    id: str
    #: Epoch ms, by the clock of the worker that began it.
    began_at: int
    #: Set when this epoch began because the data of the one before was lost.
    after_loss: DataLoss | None = None

    def to_json(self) -> str:
        loss = self.after_loss
        doc: dict[str, Any] = {"id": self.id, "began_at": self.began_at}
        if loss is not None:
            doc["after_loss"] = asdict(loss)
        return json.dumps(doc, separators=(",", ":"), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: bytes | str) -> Epoch:
        """Read an epoch document; ``ValueError`` if it is not one."""
        try:
            doc = json.loads(raw)
            loss = doc.get("after_loss")
            return cls(
                id=str(doc["id"]),
                began_at=int(doc["began_at"]),
                after_loss=None
                if loss is None
                else DataLoss(
                    previous=str(loss["previous"]),
                    noticed_at=int(loss["noticed_at"]),
                    noticed_by=str(loss["noticed_by"]),
                ),
            )
        except (KeyError, TypeError, AttributeError, UnicodeDecodeError) as exc:
            raise ValueError(f"not an epoch document: {exc}") from exc


class Epochs:
    """Read and begin the epochs of one namespace."""

    def __init__(self, redis: Any, namespace: str) -> None:
        self.redis = redis
        self.key = f"{namespace}:epoch"

    def read(self, raw: bytes | str | None = None) -> Epoch | None:
        """The current epoch (from ``raw`` when the caller fetched it), or ``None``."""
        if raw is None:
            raw = self.redis.get(self.key)
            if raw is None:
                return None
        try:
            return Epoch.from_json(raw)
        except ValueError:
            return None  # not ours to judge: the next beat begins a readable one

    def begin(self, now_ms: int, loss: DataLoss | None) -> Epoch:
        """Begin an epoch unless another worker just did; return the one that holds."""
        epoch = Epoch(uuid.uuid4().hex, now_ms, loss)
        if self.redis.set(self.key, epoch.to_json(), nx=True):
            return epoch
        found = self.read()
        return epoch if found is None else found


class EpochWatch:
    """One worker's memory of the epoch: says when a beat finds the data lost."""

    def __init__(self, epochs: Epochs) -> None:
        self.epochs = epochs
        #: The id of the epoch this worker saw last (``None`` before its first beat).
        self.known: str | None = None
        #: Losses this worker noticed, and the last one.
        self.losses = 0
        self.last: DataLoss | None = None

    def seen(self, raw: bytes | str | None, now_ms: int, worker_id: str) -> DataLoss | None:
        """Take in the epoch document a beat read (``raw``); return a loss it shows."""
        current = None if raw is None else self.epochs.read(raw)
        if raw is not None and current is None:
            return None  # not a document of ours (written by hand?): no loss to tell of
        known = self.known
        loss: DataLoss | None = None
        if current is None:
            if known is not None:  # it was there: Redis lost it, with everything else
                loss = DataLoss(known, now_ms, worker_id)
            current = self.epochs.begin(now_ms, loss)
            if loss is not None and current.after_loss is not None:
                loss = current.after_loss  # another worker's notice came first
        elif known is not None and current.id != known:
            # Another worker began a new epoch: this worker's data went with the old one.
            loss = current.after_loss or DataLoss(known, now_ms, worker_id)
        self.known = current.id
        if loss is not None:
            self.losses += 1
            self.last = loss
        return loss
