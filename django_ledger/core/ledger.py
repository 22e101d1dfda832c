"""The delivery ledger: every operation of the contract, on one Redis queue.

``Ledger`` is the one public class: the operations it shares with ``ShardedLedger`` are
written once in ``surface.py`` (``LedgerSurface``), over this class's primitives here;
what one shard has alone is here. Each operation hands its work to a module named for
what it does: admission (``admission.py``), claims and settlements
(``claiming.py``), reads (``reading.py``), repair (``repairing.py``), the gate and import
(``operating.py``). They check arguments, cut transport batches and run each batch on
one of two paths over the queue's ``Runner``: ``optimized=True`` the fused scripts
(``fused.py``, a whole batch per script call), ``optimized=False`` the reference path
(``reference.py``), built on the generic compare-and-set script and held to the same
answers by the differential tests. ``ledger_base.py`` holds the settings, keys and
plumbing the operations read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from . import cancelling, claiming, operating, repairing
from .arguments import Work, check_name, positive_int
from .layout import check_layout
from .ledger_base import LedgerBase
from .limits import Limits, LimitUse, read_limits
from .results import Admission, Claims, RepairReport, Settlement
from .runner import Runner
from .surface import LedgerSurface
from .timing import duration_ms
from .transport import MAX_BATCH, MAX_BATCH_BYTES, decodes_responses

__all__ = ["MAX_BATCH", "MAX_BATCH_BYTES", "Ledger"]


class Ledger(LedgerSurface, LedgerBase):
    """One queue's ledger on a redis-py client (``Redis`` or ``RedisCluster``)."""

    def __init__(
        self,
        redis: Any,
        namespace: str,
        queue: str,
        max_payload_bytes: int = 1_048_576,
        max_records: int = 100_000,
        optimized: bool = True,
        max_attempts: int = 16,
        retention: timedelta | float = timedelta(days=7),
        max_retained: int = 100_000,
        durability_replicas: int = 0,
        durability_timeout_ms: int = 1000,
    ) -> None:
        self.namespace = check_name(namespace, "namespace")
        self.queue = check_name(queue, "queue")
        self.max_payload_bytes = positive_int(
            max_payload_bytes, "max_payload_bytes", upper=512 * 1024 * 1024
        )
        self.max_records = positive_int(max_records, "max_records")
        self.max_attempts = positive_int(max_attempts, "max_attempts")
        self.max_retained = positive_int(max_retained, "max_retained")
        if not isinstance(optimized, bool):
            raise TypeError("optimized must be a bool")
        self.optimized = optimized
        self.retention_ms = duration_ms(retention, "retention")
        if decodes_responses(redis):
            raise ValueError(
                "the ledger needs a redis client with decode_responses=False: "
                "it verifies the exact stored bytes"
            )
        self.redis = redis
        # Durability: after each write, WAIT until this many replicas have it (0: no WAIT).
        if isinstance(durability_replicas, bool) or not isinstance(durability_replicas, int):
            raise TypeError("durability_replicas must be an int")
        if not 0 <= durability_replicas <= 100:
            raise ValueError(f"durability_replicas must be 0 to 100, got {durability_replicas}")
        self.durability_replicas = durability_replicas
        self.durability_timeout_ms = positive_int(
            durability_timeout_ms, "durability_timeout_ms", upper=3_600_000
        )
        self.runner = Runner(
            redis,
            namespace,
            queue,
            repr(self),
            durability_replicas=durability_replicas,
            durability_timeout_ms=self.durability_timeout_ms,
        )

    def __repr__(self) -> str:
        mode = "optimized" if self.optimized else "reference"
        return f"<Ledger {self.namespace}:{self.queue} {mode}>"

    # -- shards (one here; ``ShardedLedger`` has several) ---------------------------

    @property
    def shards(self) -> tuple[Ledger, ...]:
        """The one-shard ledgers this queue is made of: this ledger alone."""
        return (self,)

    def shard_for(self, request_id: str) -> Ledger:
        """The one-shard ledger that holds ``request_id``: this one."""
        return self

    def check_layout(self) -> None:
        """Refuse to run on a queue laid out in another number of shards (``LedgerError``).

        One ``GET`` (see ``layout.check_layout``); callers run it once per process.
        """
        check_layout(self.runner, self.namespace, self.queue, 1)

    # -- the surface's primitives (surface.py): one shard, this ledger -----------------

    def _laid_out(self) -> tuple[Ledger, ...]:
        return (self,)

    def _claim(self, owner: str, limit: int, lease_ms: int, hold_after: int | None) -> Claims:
        return claiming.claim_many(self, owner, limit, lease_ms, hold_after)

    def _settle_and_claim(
        self, work: list[Work], owner: str, limit: int, lease_ms: int, hold_after: int | None
    ) -> tuple[list[Settlement], Claims]:
        return claiming.settle_and_claim(self, work, owner, limit, lease_ms, hold_after)

    def _repair_page(self, cursor: str | int, count: int) -> RepairReport:
        return repairing.repair_page(self, cursor, count)

    # -- what one shard has alone -----------------------------------------------------

    def next_fence(self, floor: int = 0) -> int:
        """Take a fence above every fence this queue gave before (and above ``floor``)."""
        return cancelling.next_fence(self, floor)

    def limits(self) -> LimitUse:
        """The queue's flow limits as stored in Redis, and their use now (docs/limits.md)."""
        return read_limits(self.runner)

    def set_limits(self, limits: Limits, *, source: str = "operator", force: bool = True) -> bool:
        """Store the queue's flow limits (fused path only); say whether they changed."""
        return claiming.set_limits(self, limits, source=source, force=force)

    def set_key_limits(
        self, key: str, limits: Limits | None, *, source: str = "operator", force: bool = True
    ) -> bool:
        """Store ``key``'s own limits (``None``: remove them; fused path only)."""
        return claiming.set_key_limits(self, key, limits, source=source, force=force)

    def scan_page(self, cursor: int, count: int) -> RepairReport:
        """Repair one HSCAN page of records from ``cursor``; the report holds the next one."""
        return repairing.scan_page(self, cursor, count)

    def repair_records(
        self, observed: Iterable[tuple[Any, bytes]], cursor: str = "0"
    ) -> RepairReport:
        """Repair records against the bytes the caller read (a stale read changes nothing)."""
        return repairing.repair_records(self, observed, cursor)

    def import_many(self, items: Iterable[Mapping[str, Any]]) -> list[Admission]:
        return operating.import_many(self, items)
