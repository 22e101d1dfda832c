"""The delivery ledger: every operation of the contract, on one Redis queue.

``Ledger`` is the one public class, every operation a method here. Each hands its work
to a module named for what it does: admission (``admission.py``), claims and settlements
(``claiming.py``), reads (``reading.py``), repair (``repairing.py``), the gate and import
(``operating.py``). They check arguments, cut transport batches and run each batch on
one of two paths over the queue's ``Runner``: ``optimized=True`` the fused scripts
(``fused.py``, a whole batch per script call), ``optimized=False`` the reference path
(``reference.py``), built on the generic compare-and-set script and held to the same
answers by the differential tests. ``ledger_base.py`` holds the settings, keys and
plumbing the operations read.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any

from . import admission, cancelling, claiming, operating, reading, repairing
from .arguments import RenewItem, SettleItem, check_name, positive_int
from .cancelling import Cancellation
from .layout import check_layout
from .ledger_base import LedgerBase
from .limits import Limits, LimitUse
from .records import Record, State
from .results import Admission, Claim, Claims, RepairReport, Settlement, Stats
from .runner import Runner
from .timing import duration_ms
from .transport import MAX_BATCH, MAX_BATCH_BYTES, decodes_responses

__all__ = ["MAX_BATCH", "MAX_BATCH_BYTES", "Ledger"]


class Ledger(LedgerBase):
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

    def layout_checked_already(self) -> None:
        """Say the stored layout was checked by the caller (``get_ledger``, once a process).

        Nothing to skip here: a ledger of one shard checks only when asked.
        """

    # -- admission (admission.py) -----------------------------------------------------

    def admit(
        self,
        request_id: str,
        payload: str,
        delay: timedelta | float = 0,
        traceparent: str | None = None,
        priority: int = 0,
    ) -> Admission:
        """Admit one request, once by its id; ``priority`` -100 to 100 (higher: first)."""
        return admission.admit(self, request_id, payload, delay, traceparent, priority)

    def admit_many(
        self,
        requests: Iterable[tuple[str, str]],
        delay: timedelta | float = 0,
        traceparent: str | None = None,
        priority: int = 0,
    ) -> list[Admission]:
        """Admit requests in transport batches; answers in input order (not all-or-nothing)."""
        return admission.admit_many(self, requests, delay, traceparent, priority)

    # -- claims and settlements (claiming.py) -----------------------------------------

    def claim(self, owner: str, lease: timedelta | float = 30) -> Claim | None:
        """Claim the earliest-due PENDING record for ``owner``, or ``None``."""
        claims = self.claim_many(owner, 1, lease)
        return claims[0] if claims else None

    def claim_many(
        self,
        owner: str,
        limit: int,
        lease: timedelta | float = 30,
        *,
        hold_after: int | None = None,
    ) -> Claims:
        """Claim up to ``limit`` due records; those after the first ``hold_after`` held."""
        return claiming.claim_many(self, owner, limit, lease, hold_after=hold_after)

    def renew(self, claim: Claim, lease: timedelta | float = 30) -> Settlement:
        """Extend ``claim``'s lease to now + ``lease`` if it still holds the record."""
        return self.renew_many([(claim, lease)])[0]

    def renew_many(self, items: Iterable[RenewItem]) -> list[Settlement]:
        """Renew ``(claim, lease)`` or ``(claim, lease, started)`` items, a batch a call."""
        return claiming.renew_many(self, items)

    def settle(
        self,
        claim: Claim,
        state: State = State.COMPLETED,
        delay: timedelta | float = 0,
        result: str | bytes | None = None,
    ) -> Settlement:
        """End ``claim`` COMPLETED or FAILED, or give it back PENDING after ``delay``."""
        return self.settle_many([(claim, state, delay, result)])[0]

    def settle_many(self, items: Iterable[SettleItem]) -> list[Settlement]:
        """Settle ``(claim, state[, delay[, result]])`` items; only a lost item fails."""
        return claiming.settle_many(self, items)

    def release(self, claims: Iterable[Claim]) -> list[Settlement]:
        """Give back claims whose work never started: PENDING, due now, the attempt unspent."""
        return claiming.release(self, claims)

    def settle_and_claim(
        self,
        items: Iterable[SettleItem],
        owner: str,
        limit: int,
        lease: timedelta | float = 30,
        *,
        hold_after: int | None = None,
    ) -> tuple[list[Settlement], Claims]:
        """Settle ``items``, then claim up to ``limit`` (0: none) in the same script call."""
        return claiming.settle_and_claim(self, items, owner, limit, lease, hold_after=hold_after)

    def cancel(
        self,
        request_id: str,
        *,
        by: str,
        reason: str = "",
        fence_floor: int = 0,
        expect: bytes | None = None,
    ) -> Cancellation:
        """Cancel a record, queued or running, in one step (``cancelling.py``)."""
        return cancelling.cancel(
            self, request_id, by=by, reason=reason, fence_floor=fence_floor, expect=expect
        )

    def next_fence(self, floor: int = 0) -> int:
        """Take a fence above every fence this queue gave before (and above ``floor``)."""
        return cancelling.next_fence(self, floor)

    def limits(self) -> LimitUse:
        """The queue's flow limits as stored in Redis, and their use now (docs/limits.md)."""
        return claiming.limit_use(self)

    def set_limits(self, limits: Limits, *, source: str = "operator", force: bool = True) -> bool:
        """Store the queue's flow limits (fused path only); say whether they changed."""
        return claiming.set_limits(self, limits, source=source, force=force)

    def set_key_limits(
        self, key: str, limits: Limits | None, *, source: str = "operator", force: bool = True
    ) -> bool:
        """Store ``key``'s own limits (``None``: remove them; fused path only)."""
        return claiming.set_key_limits(self, key, limits, source=source, force=force)

    def wake_keys(self) -> list[tuple[Any, str]]:
        """The client and key an idle worker blocks on for this queue (docs/worker.md)."""
        return [(self.runner.redis, self.runner.keys.wake)]

    def cancel_keys(self) -> list[tuple[Any, str]]:
        """The client and stream a worker reads cancels of its running claims from."""
        return [(self.runner.redis, self.runner.keys.cancels)] if self.optimized else []

    # -- reads (reading.py) -----------------------------------------------------------

    def results(self, request_ids: Iterable[str]) -> list[bytes | None]:
        """The results stored with settlements, in input order (``None``: none)."""
        return reading.results(self, request_ids)

    def resolve(self, request_id: str) -> Record | None:
        """Return the verified record of ``request_id``, or ``None``."""
        return self.resolve_many([request_id])[0]

    def resolve_many(self, request_ids: Iterable[str]) -> list[Record | None]:
        """Return verified records in input order, without a round trip per id."""
        return reading.resolve_many(self, request_ids)

    def stats(self) -> Stats:
        """Read the queue's counters in one consistent snapshot, with no scan of records."""
        return reading.stats(self)

    # -- repair (repairing.py) --------------------------------------------------------

    def repair(self, cursor: str = "0", count: int = 100) -> str:
        """Repair one HSCAN page; return the next cursor (``"0"`` ends a cycle)."""
        return self.repair_page(cursor, count).cursor

    def repair_page(self, cursor: str | int = "0", count: int = 100) -> RepairReport:
        """Sweep the indexes, then repair one HSCAN page; say what it did."""
        return repairing.repair_page(self, cursor, count)

    def sweep(self, count: int = 100) -> RepairReport:
        """Repair up to ``count`` expired leases and records past retention, from the indexes."""
        return repairing.sweep(self, count)

    def scan_page(self, cursor: int, count: int) -> RepairReport:
        """Repair one HSCAN page of records from ``cursor``; the report holds the next one."""
        return repairing.scan_page(self, cursor, count)

    def repair_records(
        self, observed: Iterable[tuple[Any, bytes]], cursor: str = "0"
    ) -> RepairReport:
        """Repair records against the bytes the caller read (a stale read changes nothing)."""
        return repairing.repair_records(self, observed, cursor)

    def repair_cycle(self, count: int = 100) -> Iterator[RepairReport]:
        """Repair every record once, yielding each page's report (the last has cursor "0")."""
        cursor = "0"
        while True:
            report = self.repair_page(cursor, count)
            yield report
            cursor = report.cursor
            if cursor == "0":
                return

    # -- the gate and import (operating.py) -------------------------------------------

    def close_gate(self) -> None:
        """Hold the queue closed: no claim succeeds until ``open_gate``."""
        operating.close_gate(self)

    def open_gate(self) -> None:
        operating.open_gate(self)

    @property
    def gate_closed(self) -> bool:
        return operating.gate_closed(self)

    def import_record(
        self,
        request_id: str,
        payload: str,
        state: State,
        due_at: int,
        owner: str = "",
        **extra: Any,
    ) -> Admission:
        """Write one record as given (offline migration: only while the gate is closed).

        ``extra`` may carry ``attempts``, ``fence``, ``lease_until``, ``created_at``,
        ``updated_at`` and ``traceparent``.
        """
        fields = {"request_id": request_id, "payload": payload, "state": state, "due_at": due_at}
        return self.import_many([{**fields, "owner": owner, **extra}])[0]

    def import_many(self, items: Iterable[Mapping[str, Any]]) -> list[Admission]:
        """Import records given as field mappings; every item checked before any write."""
        return operating.import_many(self, items)
