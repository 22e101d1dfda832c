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
from .lookups import ALL_STATES, SCORE_FIELD, join_key
from .query import LedgerQuery, run_script, spans
from .shard_merge import Segment, merged_rows

__all__ = ["RecordQuery"]

_BY_LETTER = {state.letter: state for state in ALL_STATES}
#: Where each state's records come in the list (bytes that do not decode: last).
_POSITION = {state.value: position for position, state in enumerate(ALL_STATES)}
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

    def segment_args(self, segments: Sequence[Segment]) -> list[Any]:
        """Return the (index, low, high) triples of ``admin_page.lua`` for ``segments``."""
        args: list[Any] = []
        for state, low, high in segments:
            args += (
                _INDEX_NAMES[state],
                "-inf" if low is None else low,
                "+inf" if high is None else high,
            )
        return args

    def read(
        self, queue: str, shard: Ledger, segments: Sequence[Segment], offset: int, limit: int
    ) -> list[LedgerEntry]:
        """Rows ``[offset, offset + limit)`` of ``segments`` on one shard (one script call)."""
        args = ["rank", offset, limit, self._desc, *self.segment_args(segments)]
        return self.build(queue, run_script(shard, "admin_page", args)[1])

    def count_on(self, shard: Ledger, segments: Sequence[Segment]) -> list[int]:
        """How many rows one shard has in each of ``segments`` (one script call)."""
        args = ["rank", 0, 0, self._desc, *self.segment_args(segments)]
        return [int(n) for n in run_script(shard, "admin_page", args)[0]]

    def counts(self) -> dict[str, int]:
        """Return how many records each queue contributes (one script call per shard)."""
        if self._cached_counts is None:
            segments = self.spec.segments()
            counts = {}
            for queue in self.spec.queues:
                shards = self.ledger(queue).shards if segments else ()
                per_shard = [self.count_on(shard, segments) for shard in shards]
                self._cached_shard_counts[queue] = per_shard
                counts[queue] = sum(sum(segment) for segment in per_shard)
            self._cached_counts = counts
        return self._cached_counts

    @property
    def _desc(self) -> str:
        return "1" if self.spec.descending else "0"

    def page(self, start: int, stop: int) -> list[LedgerEntry]:
        out: list[LedgerEntry] = []
        for queue, offset, want in spans(self.counts().items(), start, stop - start):
            ledger = self.ledger(queue)
            if len(ledger.shards) > 1:
                out += self.sharded_rows(queue, ledger, offset, want)
            else:
                out += self.read(queue, ledger.shards[0], self.spec.segments(), offset, want)
        return out

    def sharded_rows(
        self, queue: str, ledger: AnyLedger, offset: int, want: int
    ) -> list[LedgerEntry]:
        """Rows ``[offset, offset + want)`` of a sharded queue: its shards' merged by state."""

        def read(shard: Ledger, segment: Segment, limit: int) -> list[LedgerEntry]:
            return self.read(queue, shard, [segment], 0, limit)

        return merged_rows(
            ledger.shards,
            self.spec.segments(),
            self._cached_shard_counts[queue],
            (offset, want),
            self.spec.descending,
            read,
            self.count_on,
        )

    def found(self) -> list[LedgerEntry]:
        """Read the records asked for by id, one script call per shard."""
        if self._cached_found is None:
            found: list[LedgerEntry] = []
            for queue, ids in self.wanted().items():
                for shard, mine in self.by_shard(queue, ids):
                    reply = run_script(shard, "admin_page", ["ids", *mine])
                    for row in self.build(queue, reply[1]):
                        state = None if row.state == "CORRUPT" else State(row.state)
                        if self.spec.matches(queue, state, row.score):
                            found.append(row)
            self._cached_found = sorted(found, key=self._sort_key)
        return self._cached_found

    def _sort_key(self, row: LedgerEntry) -> tuple[int, int, int, str]:
        score = row.score or 0
        return (
            self.spec.queues.index(row.queue),
            _POSITION.get(row.state, len(ALL_STATES)),
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
