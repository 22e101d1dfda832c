"""One queue spread over several shards, each a whole ledger under its own hash tag.

``ShardedLedger`` answers every operation of ``Ledger`` over ``N`` one-shard ledgers
(``layout.py`` names them): a request id always lives in the same shard (CRC-32 of the
id), so admission stays idempotent by id and every write of one id is a script on one
shard, with every guarantee of one ledger. What spans shards:

- admissions, settlements, renewals, releases, reads and imports are grouped by shard,
  one call per shard and transport batch, and answered in input order; arguments are
  checked before the first shard is written;
- claims visit the shards in turn from a start that moves on each call, so no shard
  waits for ever; ``settle_and_claim`` (the worker's) claims from the ledger's home
  shard, dealt in turn to the queue's claimers, in the same call as its settlements
  there, and every ``4 N``-th call from the shard whose turn it is;
- ``stats`` sums the shards; ``repair_page`` sweeps every shard's indexes each page
  and scans one shard's records at a time, with the cursor ``"<shard>.<cursor>"``;
- the gate closes and opens every shard.

Order: earliest-due-first and priority bands hold within a shard; across shards a
claim may take a record due later, or of lower priority, than one waiting in another
shard. Bounds (``max_records``, ``max_retained``) apply per shard, each getting
``ceil(bound / N)``.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from .arguments import (
    RenewItem,
    SettleItem,
    check_claim,
    check_priority,
    positive_int,
    renew_work,
    settle_work,
)
from .cancelling import Cancellation
from .layout import check_layout, shard_index, shard_queues
from .ledger import Ledger
from .records import Record, State, id_problem
from .results import Admission, Claim, Claims, RepairReport, Settlement, Stats
from .sharded_claims import ShardedClaiming
from .sharded_keys import PER_SHARD, PerShard
from .timing import duration_ms
from .transport import Translate

__all__ = ["AnyLedger", "ShardedLedger"]

Item = TypeVar("Item")
Answer = TypeVar("Answer")


class ShardedLedger(ShardedClaiming):
    """One queue's ledger over ``shards`` shards on a redis-py client (``Redis`` or ``RedisCluster``).

    It holds one ``Ledger`` per shard (``shards``) and answers the operations that span
    them; what belongs to one shard (its keys, its scripts, its runner) it does not have:
    asking for it raises ``PerShard``, which says to use ``shards[i]`` or ``shard_for``.
    """

    def __init__(
        self,
        redis: Any,
        namespace: str,
        queue: str,
        shards: int,
        max_payload_bytes: int = 1_048_576,
        max_records: int = 100_000,
        optimized: bool = True,
        max_attempts: int = 16,
        retention: timedelta | float = timedelta(days=7),
        max_retained: int = 100_000,
        durability_replicas: int = 0,
        durability_timeout_ms: int = 1000,
    ) -> None:
        names = shard_queues(namespace, queue, shards)
        positive_int(max_records, "max_records")
        positive_int(max_retained, "max_retained")
        self._shards = tuple(
            Ledger(
                redis,
                namespace,
                name,
                max_payload_bytes=max_payload_bytes,
                max_records=math.ceil(max_records / shards),
                optimized=optimized,
                max_attempts=max_attempts,
                retention=retention,
                max_retained=math.ceil(max_retained / shards),
                durability_replicas=durability_replicas,
                durability_timeout_ms=durability_timeout_ms,
            )
            for name in names
        )
        first = self._shards[0]
        self.namespace, self.queue, self.redis = first.namespace, first.queue, redis
        self.max_payload_bytes = first.max_payload_bytes
        self.max_records, self.max_retained = max_records, max_retained
        self.max_attempts, self.optimized = first.max_attempts, first.optimized
        self.retention_ms = first.retention_ms
        self.durability_replicas = first.durability_replicas
        self.durability_timeout_ms = first.durability_timeout_ms
        self.shard_count = shards
        # settle_and_claim claims from the shard whose turn it is every this many calls
        # (measured on 3 masters: every 4N calls drains fastest; every call, the slowest).
        self._rotate_every = 4 * shards
        # The turn: which shard is claimed from first; it moves on each claim call. A
        # random start over a whole cycle of turns, so that workers started together are
        # on different shards (and move on at different calls).
        self._turn = itertools.count(random.randrange(self._rotate_every * shards))
        self._layout_checked = False
        # settle_and_claim's home shard (``_home_shard``), and whether it ran short.
        self._home: int | None = None
        self._away = False

    def __repr__(self) -> str:
        mode = "optimized" if self.optimized else "reference"
        return f"<ShardedLedger {self.namespace}:{self.queue} {self.shard_count} shards {mode}>"

    if not TYPE_CHECKING:  # a type checker sees no such members at all

        def __getattr__(self, name: str) -> Any:
            """What one shard has (its keys, scripts, runner) is not the whole queue's."""
            if name in PER_SHARD:
                raise PerShard(repr(self), self.shard_count, name)
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def retention(self) -> timedelta:
        return timedelta(milliseconds=self.retention_ms)

    # -- shards -----------------------------------------------------------------------

    @property
    def shards(self) -> tuple[Ledger, ...]:
        return self._shards

    def shard_for(self, request_id: str) -> Ledger:
        return self._shards[shard_index(request_id, self.shard_count)]

    def check_layout(self) -> None:
        """Record the layout, or refuse a queue that holds records in another one.

        Every operation runs it once per ledger before its first call to Redis, so a
        sharded queue always has its layout stored before it holds a record.
        """
        check_layout(self._shards[0].runner, self.namespace, self.queue, self.shard_count)
        self._layout_checked = True

    def layout_checked_already(self) -> None:
        """Skip the check before the first operation: the caller made it for this queue."""
        self._layout_checked = True

    def _laid_out(self) -> tuple[Ledger, ...]:
        if not self._layout_checked:
            self.check_layout()
        return self._shards

    @property
    def clock_skew_ms(self) -> int:
        return self._shards[0].clock_skew_ms

    @clock_skew_ms.setter
    def clock_skew_ms(self, value: int) -> None:
        for shard in self._shards:
            shard.clock_skew_ms = value

    def translate_errors(self) -> Translate:
        return self._shards[0].translate_errors()

    def server_time_ms(self) -> int:
        """The clock of shard 0's master (on a cluster each shard's scripts read their own)."""
        return self._shards[0].server_time_ms()

    # -- routing ----------------------------------------------------------------------

    def _routed(
        self,
        items: Sequence[Item],
        request_id: Callable[[Item], object],
        call: Callable[[Ledger, list[Item]], list[Answer]],
    ) -> list[Answer]:
        """Call ``call`` once per shard with that shard's items; answers in input order."""
        groups: dict[int, list[int]] = {}
        for position, item in enumerate(items):
            groups.setdefault(shard_index(request_id(item), self.shard_count), []).append(position)
        answers: list[Any] = [None] * len(items)
        for index, positions in groups.items():
            got = call(self._laid_out()[index], [items[p] for p in positions])
            for position, answer in zip(positions, got, strict=True):
                answers[position] = answer
        return answers

    # -- admission --------------------------------------------------------------------

    def admit(
        self,
        request_id: str,
        payload: str,
        delay: timedelta | float = 0,
        traceparent: str | None = None,
        priority: int = 0,
    ) -> Admission:
        """Admit one request on its id's shard (``Ledger.admit``)."""
        return self.admit_many([(request_id, payload)], delay, traceparent, priority)[0]

    def admit_many(
        self,
        requests: Iterable[tuple[str, str]],
        delay: timedelta | float = 0,
        traceparent: str | None = None,
        priority: int = 0,
    ) -> list[Admission]:
        duration_ms(delay, "delay")
        check_priority(priority)
        items = list(requests)
        # What a shard would raise on, checked before any shard is written.
        for item in items:
            if not isinstance(item, tuple | list) or len(item) != 2:
                raise TypeError("each request must be a (request_id, payload) pair")
            if not isinstance(item[1], str):
                raise TypeError(f"payload must be a str, not {type(item[1]).__name__}")
        return self._routed(
            items,
            lambda item: item[0],
            lambda shard, group: shard.admit_many(group, delay, traceparent, priority),
        )

    # -- claims (the many-item forms are ShardedClaiming's and below) -------------------

    def claim(self, owner: str, lease: timedelta | float = 30) -> Claim | None:
        """Claim one due record from the shards in turn (``Ledger.claim``), or ``None``."""
        claims: Claims = self.claim_many(owner, 1, lease)
        return claims[0] if claims else None

    def renew(self, claim: Claim, lease: timedelta | float = 30) -> Settlement:
        return self.renew_many([(claim, lease)])[0]

    def settle(
        self,
        claim: Claim,
        state: State = State.COMPLETED,
        delay: timedelta | float = 0,
        result: str | bytes | None = None,
    ) -> Settlement:
        return self.settle_many([(claim, state, delay, result)])[0]

    def renew_many(self, items: Iterable[RenewItem]) -> list[Settlement]:
        pairs = list(items)
        for item in pairs:
            renew_work(item)
        return self._routed(
            pairs, lambda item: item[0].request_id, lambda shard, group: shard.renew_many(group)
        )

    def settle_many(self, items: Iterable[SettleItem]) -> list[Settlement]:
        checked = list(items)
        for item in checked:
            settle_work(item)
        return self._routed(
            checked, lambda item: item[0].request_id, lambda shard, group: shard.settle_many(group)
        )

    def release(self, claims: Iterable[Claim]) -> list[Settlement]:
        given = list(claims)
        for claim in given:
            check_claim(claim)
        return self._routed(
            given, lambda claim: claim.request_id, lambda shard, group: shard.release(group)
        )

    # -- reads ------------------------------------------------------------------------

    def results(self, request_ids: Iterable[str]) -> list[bytes | None]:
        return self._routed(
            list(request_ids), lambda request_id: request_id, lambda s, g: s.results(g)
        )

    def resolve(self, request_id: str) -> Record | None:
        return self.resolve_many([request_id])[0]

    def resolve_many(self, request_ids: Iterable[str]) -> list[Record | None]:
        return self._routed(
            list(request_ids), lambda request_id: request_id, lambda s, g: s.resolve_many(g)
        )

    def cancel(
        self,
        request_id: str,
        *,
        by: str,
        reason: str = "",
        fence_floor: int = 0,
        expect: bytes | None = None,
    ) -> Cancellation:
        """Cancel a record on the shard that holds it (``Ledger.cancel``).

        ``fence_floor`` is a fence of that shard (``shard_for(request_id).next_fence()``).
        """
        problem = id_problem(request_id)
        if problem is not None:
            raise ValueError(problem)
        self._laid_out()
        shard = self.shard_for(request_id)
        return shard.cancel(
            request_id, by=by, reason=reason, fence_floor=fence_floor, expect=expect
        )

    def wake_keys(self) -> list[tuple[Any, str]]:
        """Each shard's client and wake key: an idle worker blocks on them all."""
        return [key for shard in self._laid_out() for key in shard.wake_keys()]

    def cancel_keys(self) -> list[tuple[Any, str]]:
        """Each shard's client and cancels stream (``Ledger.cancel_keys``)."""
        return [key for shard in self._laid_out() for key in shard.cancel_keys()]

    def stats(self) -> Stats:
        """The shards' counters summed (each shard's own snapshot, read one after another)."""
        return Stats.summed([shard.stats() for shard in self._laid_out()])

    # -- repair -----------------------------------------------------------------------

    def repair_page(self, cursor: str | int = "0", count: int = 100) -> RepairReport:
        """Sweep every shard's indexes, then repair one HSCAN page of one shard's records.

        The cursor is ``"<shard>.<cursor>"`` (``"0"`` starts a cycle at shard 0 and ends
        it after the last shard's last page).
        """
        index, inner = self._parse_cursor(cursor)
        positive_int(count, "count", upper=10_000)
        report = RepairReport(cursor="0")
        for shard in self._laid_out():
            report.add(shard.sweep(count))
        page = self._laid_out()[index].scan_page(inner, count)
        if page.cursor != "0":
            page.cursor = f"{index}.{page.cursor}"
        elif index + 1 < self.shard_count:
            page.cursor = f"{index + 1}.0"
        report.add(page)
        return report

    def _parse_cursor(self, cursor: object) -> tuple[int, int]:
        if isinstance(cursor, bool) or not isinstance(cursor, str | int):
            raise TypeError(f"cursor must be a str, not {type(cursor).__name__}")
        text = str(cursor)
        shard, dot, inner = text.partition(".")
        if not dot:
            shard, inner = "0", text
        if (
            not (shard.isdigit() and inner.isdigit())
            or len(inner) > 20
            or int(shard) >= self.shard_count
        ):
            raise ValueError(f"cursor must be a cursor returned by repair, got {cursor!r}")
        return int(shard), int(inner)

    def repair(self, cursor: str = "0", count: int = 100) -> str:
        """Repair one page (``repair_page``); return the next cursor (``"0"`` ends a cycle)."""
        return self.repair_page(cursor, count).cursor

    def repair_cycle(self, count: int = 100) -> Iterator[RepairReport]:
        """Repair every record of every shard once, yielding each page's report."""
        cursor = "0"
        while True:
            report = self.repair_page(cursor, count)
            yield report
            cursor = report.cursor
            if cursor == "0":
                return

    def sweep(self, count: int = 100) -> RepairReport:
        report = RepairReport(cursor="0")
        for shard in self._laid_out():
            report.add(shard.sweep(count))
        return report

    # -- gate and import --------------------------------------------------------------

    def close_gate(self) -> None:
        """Close every shard (once this returns, no claim succeeds on any)."""
        for shard in self._laid_out():
            shard.close_gate()

    def open_gate(self) -> None:
        for shard in self._laid_out():
            shard.open_gate()

    @property
    def gate_closed(self) -> bool:
        """True when any shard is closed."""
        return any(shard.gate_closed for shard in self._laid_out())

    def import_record(
        self,
        request_id: str,
        payload: str,
        state: State,
        due_at: int,
        owner: str = "",
        **extra: Any,
    ) -> Admission:
        """Write one record as given into its id's shard (``Ledger.import_record``)."""
        fields = {"request_id": request_id, "payload": payload, "state": state, "due_at": due_at}
        return self.import_many([{**fields, "owner": owner, **extra}])[0]

    def import_many(self, items: Iterable[Mapping[str, Any]]) -> list[Admission]:
        """Import records, each into its id's shard; every item is checked before any write."""
        from .importing import prepare_import  # local: import formats are not hot

        given = list(items)
        now = self.server_time_ms()
        ids = [
            prepare_import(fields, now, self.max_payload_bytes)[0].request_id for fields in given
        ]
        pairs = list(zip(ids, given, strict=True))
        return self._routed(
            pairs, lambda pair: pair[0], lambda shard, group: shard.import_many(g for _, g in group)
        )


#: A queue's ledger, of one shard or several: what ``get_ledger`` answers.
AnyLedger = Ledger | ShardedLedger
