"""The records list's query: rows read by rank in the indexes (``admin_page.lua``).

Records are grouped by queue and state and sorted by their state's score; a slice
reads exactly the rows shown. A sharded queue's page is merged from its shards
(``shard_merge``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.ledger import Ledger
from ..core.records import State, ms_to_datetime
from ..core.sharded import AnyLedger
from ..models import LedgerEntry
from .lookups import ALL_STATES, SCORE_FIELD, Spec, join_key
from .query import LedgerQuery, run_script
from .shard_merge import Segment, merged_rows

__all__ = ["RecordQuery"]

_BY_LETTER = {state.letter: state for state in ALL_STATES}
#: The queue key (``QueueKeys``' field, Lua's ``K``) that indexes each state's records.
_INDEX_NAMES = {
    State.PENDING: "ready",
    State.CLAIMED: "leases",
    State.COMPLETED: "completed",
    State.FAILED: "failed",
    State.DEAD: "dead",
}


class RecordQuery(LedgerQuery):
    """Records of the queues in the spec, grouped by queue and state, sorted by score."""

    def __init__(self, model: type[LedgerEntry], spec: Spec, order_by: Sequence[Any] = ()) -> None:
        super().__init__(model, spec, order_by)
        self._cached_counts: dict[str, int] | None = None
        #: Each queue's segment sizes, per shard (what ``counts`` read).
        self._cached_shard_counts: dict[str, list[list[int]]] = {}
        self._cached_found: list[LedgerEntry] | None = None

    def segment_args(self, ledger: Ledger, segments: Sequence[Segment] | None = None) -> list[Any]:
        """Return the (index, low, high) triples of ``admin_page.lua`` for this spec.

        ``ledger`` is a one-shard ledger; ``segments`` defaults to the spec's.
        """
        args: list[Any] = []
        for state, low, high in self.spec.segments() if segments is None else segments:
            args += (
                _INDEX_NAMES[state],
                "-inf" if low is None else low,
                "+inf" if high is None else high,
            )
        return args

    def counts(self) -> dict[str, int]:
        """Return how many records each queue contributes (one script call per shard)."""
        if self._cached_counts is None:
            counts = {}
            shard_counts: dict[str, list[list[int]]] = {}
            for queue in self.spec.queues:
                per_shard: list[list[int]] = []
                for shard in self.ledger(queue).shards:
                    segments = self.segment_args(shard)
                    if not segments:
                        break
                    reply = run_script(shard, "admin_page", ["rank", 0, 0, self._desc, *segments])
                    per_shard.append([int(n) for n in reply[0]])
                shard_counts[queue] = per_shard
                counts[queue] = sum(sum(segment) for segment in per_shard)
            self._cached_counts = counts
            self._cached_shard_counts = shard_counts
        return self._cached_counts

    @property
    def _desc(self) -> str:
        return "1" if self.spec.descending else "0"

    def total(self) -> int:
        if self.spec.idents is not None:
            return len(self.found())
        return sum(self.counts().values())

    def rows(self, start: int, stop: int) -> list[LedgerEntry]:
        if self.spec.idents is not None:
            return self.found()[start:stop]
        out: list[LedgerEntry] = []
        offset, want = start, stop - start
        for queue, count in self.counts().items():
            if want <= 0:
                break
            if offset >= count:
                offset -= count
                continue
            ledger = self.ledger(queue)
            if len(ledger.shards) > 1:
                out += self.sharded_rows(queue, ledger, offset, want)
            else:
                single = ledger.shards[0]
                args = ["rank", offset, want, self._desc, *self.segment_args(single)]
                reply = run_script(single, "admin_page", args)
                out += self.build(queue, reply[1])
            want -= min(want, count - offset)
            offset = 0
        return out

    def sharded_rows(
        self, queue: str, ledger: AnyLedger, offset: int, want: int
    ) -> list[LedgerEntry]:
        """Rows ``[offset, offset + want)`` of a sharded queue: its shards' merged by state."""

        def read(shard: Ledger, segment: Segment, limit: int) -> list[LedgerEntry]:
            args = ["rank", 0, limit, self._desc, *self.segment_args(shard, [segment])]
            return self.build(queue, run_script(shard, "admin_page", args)[1])

        def count(shard: Ledger, segments: Sequence[Segment]) -> list[int]:
            args = ["rank", 0, 0, self._desc, *self.segment_args(shard, segments)]
            return [int(n) for n in run_script(shard, "admin_page", args)[0]]

        return merged_rows(
            ledger.shards,
            self.spec.segments(),
            self._cached_shard_counts[queue],
            (offset, want),
            self.spec.descending,
            read,
            count,
        )

    def found(self) -> list[LedgerEntry]:
        """Read the records asked for by id, one script call per queue."""
        if self._cached_found is None:
            wanted: dict[str, list[str]] = {}
            for queue, request_id in sorted(self.spec.idents or (), key=repr):
                for name in self.spec.queues if queue is None else (queue,):
                    if name in self.spec.queues and not self.spec.empty:
                        wanted.setdefault(name, []).append(request_id)
            found: list[LedgerEntry] = []
            for queue in self.spec.queues:
                if queue not in wanted:
                    continue
                ledger = self.ledger(queue)
                by_shard: dict[int, list[str]] = {}
                for request_id in wanted[queue]:
                    by_shard.setdefault(id(ledger.shard_for(request_id)), []).append(request_id)
                for shard in ledger.shards:
                    if id(shard) not in by_shard:
                        continue
                    reply = run_script(shard, "admin_page", ["ids", *by_shard[id(shard)]])
                    for row in self.build(queue, reply[1]):
                        state = None if row.state == "CORRUPT" else State(row.state)
                        if self.spec.matches(queue, state, row.score):
                            found.append(row)
            self._cached_found = sorted(found, key=self._sort_key)
        return self._cached_found

    def _sort_key(self, row: LedgerEntry) -> tuple[int, int, int, str]:
        state = next((s for s in ALL_STATES if s.value == row.state), None)
        position = ALL_STATES.index(state) if state is not None else len(ALL_STATES)
        score = row.score or 0
        return (
            self.spec.queues.index(row.queue),
            position,
            -score if self.spec.descending else score,
            row.request_id,
        )

    def build(self, queue: str, flat: list[Any]) -> list[LedgerEntry]:
        """Turn ``admin_page.lua`` rows (12 values each) into model instances."""
        rows = []
        for i in range(0, len(flat), 12):
            raw_id, letter, due, lease, attempts, fence, created, updated, owner, trace = flat[
                i : i + 10
            ]
            size, task = flat[i + 10 : i + 12]
            request_id = raw_id.decode("utf-8", "replace")
            state = _BY_LETTER.get(letter)
            row = self.model(
                key=join_key(queue, request_id),
                request_id=request_id,
                queue=queue,
                size=int(size),
            )
            row.task = task.decode("utf-8", "replace")
            if state is None:
                row.state = "CORRUPT"
                row.error = "the stored bytes do not decode"
                row.score = None
            else:
                lease_until = None if int(lease) < 0 else int(lease)
                row.state = state.value
                row.due_at = ms_to_datetime(int(due))
                row.lease_until = None if lease_until is None else ms_to_datetime(lease_until)
                row.attempts = int(attempts)
                row.fence = int(fence)
                row.created_at = ms_to_datetime(int(created))
                row.updated_at = ms_to_datetime(int(updated))
                row.owner = owner.decode("utf-8", "replace")
                row.traceparent = trace.decode("ascii", "replace")
                scores = {
                    "due_at": int(due),
                    "lease_until": lease_until,
                    "updated_at": int(updated),
                }
                row.score = scores[SCORE_FIELD[state]]
            rows.append(row)
        return rows
