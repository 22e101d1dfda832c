"""A queue's public operations, written once for one shard (``Ledger``) or several.

``LedgerSurface`` holds every operation that ``Ledger`` and ``ShardedLedger`` both answer:
its signature, its docstring and the checks of its arguments. The work goes to the
queue's one-shard ledgers (``_laid_out``: a ``Ledger`` itself, a ``ShardedLedger``'s
shards): one call per shard that holds the items, answers in input order (``_routed``;
items a shard would refuse are refused before the first of several shards is written),
or one call on every shard (``_every``). What claims and repair do over several shards
each class does its own way, on arguments checked here: ``_claim``,
``_settle_and_claim`` and ``_repair_page``.

The operations themselves are functions over a one-shard ledger, in the modules named
for what they do (``admission.py``, ``claiming.py``, ``reading.py``, ``repairing.py``,
``operating.py``, ``cancelling.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any, TypeVar

from . import admission, cancelling, claiming, operating, reading, repairing
from .arguments import (
    RenewItem,
    SettleItem,
    Work,
    check_claim,
    check_priority,
    renew_work,
    settle_work,
)
from .cancelling import Cancellation
from .layout import shard_index
from .ledger_base import LedgerBase
from .records import Record, State
from .results import Admission, Claim, Claims, RepairReport, Settlement, Stats
from .timing import duration_ms

__all__ = ["LedgerSurface"]

Item = TypeVar("Item")
Answer = TypeVar("Answer")


class LedgerSurface(ABC):
    """The operations of a queue's ledger, of one shard or several (see the module)."""

    optimized: bool
    retention_ms: int

    @property
    def retention(self) -> timedelta:
        return timedelta(milliseconds=self.retention_ms)

    # -- the primitives -----------------------------------------------------------------

    @abstractmethod
    def _laid_out(self) -> tuple[LedgerBase, ...]:
        """The queue's one-shard ledgers, in shard order (the stored layout checked)."""

    def _holder(self, request_id: str) -> LedgerBase:
        """The one-shard ledger that holds ``request_id``."""
        shards = self._laid_out()
        return shards[shard_index(request_id, len(shards))]

    def _routed(
        self,
        items: list[Item],
        request_id: Callable[[Item], object],
        call: Callable[[LedgerBase, list[Item]], list[Answer]],
        check: Callable[[Item], object] | None = None,
    ) -> list[Answer]:
        """Call ``call`` once per shard with that shard's items; answers in input order.

        ``check`` runs on every item before the first of several shards is written.
        """
        shards = self._laid_out()
        if len(shards) == 1:
            return call(shards[0], items)  # the one call checks every item before it writes
        if check is not None:
            for item in items:
                check(item)
        groups: dict[int, list[int]] = {}
        for position, item in enumerate(items):
            groups.setdefault(shard_index(request_id(item), len(shards)), []).append(position)
        answers: list[Any] = [None] * len(items)
        for index, positions in groups.items():
            got = call(shards[index], [items[p] for p in positions])
            for position, answer in zip(positions, got, strict=True):
                answers[position] = answer
        return answers

    def _every(self, call: Callable[[LedgerBase], Answer]) -> list[Answer]:
        """``call`` on every one-shard ledger of the queue, in shard order."""
        return [call(shard) for shard in self._laid_out()]

    @abstractmethod
    def _claim(self, owner: str, limit: int, lease_ms: int, hold_after: int | None) -> Claims:
        """Claim up to ``limit`` (``claim_many``'s arguments checked)."""

    @abstractmethod
    def _settle_and_claim(
        self, work: list[Work], owner: str, limit: int, lease_ms: int, hold_after: int | None
    ) -> tuple[list[Settlement], Claims]:
        """Settle ``work``, then claim up to ``limit`` (the arguments checked)."""

    @abstractmethod
    def _repair_page(self, cursor: str | int, count: int) -> RepairReport:
        """Sweep the indexes, then repair one page of records from ``cursor``."""

    @abstractmethod
    def import_many(self, items: Iterable[Mapping[str, Any]]) -> list[Admission]:
        """Import records given as field mappings; every item checked before any write."""

    # -- admission (admission.py) -------------------------------------------------------

    def admit(
        self,
        request_id: str,
        payload: str,
        delay: timedelta | float = 0,
        traceparent: str | None = None,
        priority: int = 0,
    ) -> Admission:
        """Admit one request, once by its id; ``priority`` -100 to 100 (higher: first)."""
        ledger = self._holder(request_id)
        return admission.admit(ledger, request_id, payload, delay, traceparent, priority)

    def admit_many(
        self,
        requests: Iterable[tuple[str, str]],
        delay: timedelta | float = 0,
        traceparent: str | None = None,
        priority: int = 0,
    ) -> list[Admission]:
        """Admit requests in transport batches; answers in input order (not all-or-nothing)."""
        duration_ms(delay, "delay")
        check_priority(priority)
        return self._routed(
            list(requests),
            lambda item: item[0],
            lambda ledger, group: admission.admit_many(ledger, group, delay, traceparent, priority),
            lambda item: admission.check_payload(admission.request_pair(item)[1]),
        )

    # -- claims and settlements (claiming.py) -------------------------------------------

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
        lease_ms = claiming.claim_arguments(owner, limit, lease, hold_after)
        return self._claim(owner, limit, lease_ms, hold_after)

    def renew(self, claim: Claim, lease: timedelta | float = 30) -> Settlement:
        """Extend ``claim``'s lease to now + ``lease`` if it still holds the record."""
        return self.renew_many([(claim, lease)])[0]

    def renew_many(self, items: Iterable[RenewItem]) -> list[Settlement]:
        """Renew ``(claim, lease)`` or ``(claim, lease, started)`` items, a batch a call."""
        return self._routed(list(items), _claimed_id, claiming.renew_many, renew_work)

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
        return self._routed(list(items), _claimed_id, claiming.settle_many, settle_work)

    def release(self, claims: Iterable[Claim]) -> list[Settlement]:
        """Give back claims whose work never started: PENDING, due now, the attempt unspent."""
        given = list(claims)
        return self._routed(given, lambda claim: claim.request_id, claiming.release, check_claim)

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
        work = [settle_work(item) for item in items]
        lease_ms = claiming.claim_arguments(owner, limit, lease, hold_after, settling=True)
        return self._settle_and_claim(work, owner, limit, lease_ms, hold_after)

    def cancel(
        self,
        request_id: str,
        *,
        by: str,
        reason: str = "",
        fence_floor: int = 0,
        expect: bytes | None = None,
    ) -> Cancellation:
        """Cancel a record, queued or running, in one step (``cancelling.py``).

        ``fence_floor`` is a fence of the shard that holds the record
        (``shard_for(request_id).next_fence()``).
        """
        return cancelling.cancel(
            self._holder(request_id),
            request_id,
            by=by,
            reason=reason,
            fence_floor=fence_floor,
            expect=expect,
        )

    def wake_keys(self) -> list[tuple[Any, str]]:
        """The clients and keys an idle worker blocks on for this queue (docs/worker.md)."""
        return self._every(lambda ledger: (ledger.runner.redis, ledger.runner.keys.wake))

    def cancel_keys(self) -> list[tuple[Any, str]]:
        """The clients and streams a worker reads cancels of its running claims from."""
        if not self.optimized:
            return []
        return self._every(lambda ledger: (ledger.runner.redis, ledger.runner.keys.cancels))

    # -- reads (reading.py) -------------------------------------------------------------

    def results(self, request_ids: Iterable[str]) -> list[bytes | None]:
        """The results stored with settlements, in input order (``None``: none)."""
        return self._routed(list(request_ids), _itself, reading.results)

    def resolve(self, request_id: str) -> Record | None:
        """Return the verified record of ``request_id``, or ``None``."""
        return self.resolve_many([request_id])[0]

    def resolve_many(self, request_ids: Iterable[str]) -> list[Record | None]:
        """Return verified records in input order, without a round trip per id."""
        return self._routed(list(request_ids), _itself, reading.resolve_many)

    def stats(self) -> Stats:
        """The queue's counters, with no scan of records: one consistent snapshot a shard,
        the shards' summed."""
        parts = self._every(reading.stats)
        return parts[0] if len(parts) == 1 else Stats.summed(parts)

    # -- repair (repairing.py) ----------------------------------------------------------

    def repair(self, cursor: str = "0", count: int = 100) -> str:
        """Repair one HSCAN page; return the next cursor (``"0"`` ends a cycle)."""
        return self.repair_page(cursor, count).cursor

    def repair_page(self, cursor: str | int = "0", count: int = 100) -> RepairReport:
        """Sweep the indexes, then repair one HSCAN page; say what it did.

        On a sharded queue every shard's indexes are swept, and the page is one shard's:
        the cursor is ``"<shard>.<cursor>"`` (``"0"`` starts a cycle at shard 0 and ends
        it after the last shard's last page).
        """
        return self._repair_page(cursor, count)

    def sweep(self, count: int = 100) -> RepairReport:
        """Repair up to ``count`` expired leases and records past retention (a shard),
        from the indexes."""
        reports = self._every(lambda ledger: repairing.sweep(ledger, count))
        if len(reports) == 1:
            return reports[0]
        summed = RepairReport(cursor="0")
        for report in reports:
            summed.add(report)
        return summed

    def repair_cycle(self, count: int = 100) -> Iterator[RepairReport]:
        """Repair every record once, yielding each page's report (the last has cursor "0")."""
        cursor = "0"
        while True:
            report = self.repair_page(cursor, count)
            yield report
            cursor = report.cursor
            if cursor == "0":
                return

    # -- the gate and import (operating.py) ---------------------------------------------

    def close_gate(self) -> None:
        """Hold the queue closed, every shard: once this returns, no claim succeeds until
        ``open_gate``."""
        self._every(operating.close_gate)

    def open_gate(self) -> None:
        self._every(operating.open_gate)

    @property
    def gate_closed(self) -> bool:
        """True when the queue (any of its shards) is closed."""
        return any(self._every(operating.gate_closed))

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


def _itself(request_id: str) -> str:
    return request_id


def _claimed_id(item: RenewItem | SettleItem) -> object:
    """The request id of a renewal's or a settlement's claim (checked by the item check)."""
    return item[0].request_id
