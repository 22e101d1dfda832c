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
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from . import operating
from .arguments import positive_int
from .layout import check_layout, shard_index, shard_queues
from .ledger import Ledger
from .repairing import parse_cursor
from .results import Admission, RepairReport
from .sharded_claims import ShardedClaiming
from .sharded_keys import PER_SHARD, PerShard
from .transport import Translate

__all__ = ["AnyLedger", "ShardedLedger"]


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

    # -- the surface's primitives (surface.py; claims: sharded_claims.py) --------------

    def _repair_page(self, cursor: str | int, count: int) -> RepairReport:
        """Sweep every shard's indexes, then repair one HSCAN page of one shard's records."""
        index, inner = parse_cursor(cursor, self.shard_count)
        positive_int(count, "count", upper=10_000)
        report = self.sweep(count)
        page = self._laid_out()[index].scan_page(inner, count)
        if page.cursor != "0":
            page.cursor = f"{index}.{page.cursor}"
        elif index + 1 < self.shard_count:
            page.cursor = f"{index + 1}.0"
        report.add(page)
        return report

    # -- import ---------------------------------------------------------------------

    def import_many(self, items: Iterable[Mapping[str, Any]]) -> list[Admission]:
        """Import records, each into its id's shard; every item checked before any write."""
        from .importing import prepare_import  # local: import formats are not hot

        given = list(items)
        now = self.server_time_ms()
        ids = [
            prepare_import(fields, now, self.max_payload_bytes)[0].request_id for fields in given
        ]
        pairs = list(zip(ids, given, strict=True))
        return self._routed(
            pairs,
            lambda pair: pair[0],
            lambda shard, group: operating.import_many(shard, [g for _, g in group]),
        )


#: A queue's ledger, of one shard or several: what ``get_ledger`` answers.
AnyLedger = Ledger | ShardedLedger
