"""Lazy queries over Redis that the stock admin ``ChangeList`` can drive.

A query is a ``Spec`` until ``count()`` or a slice: ``filter``, ``order_by``,
``distinct`` and friends only build a new spec. A slice reads exactly the rows shown,
by rank in the indexes (``admin_page.lua``), so page 5,000 costs what page 1 does.

A sharded queue (``SHARDS`` > 1) is listed as one queue: its counts are the sums of
its shards', and a page of one state merges the shards' rows in index order (score,
then id, as one sorted set orders them). That merge reads, from each shard, the rows
of that state up to the end of the page; a deeper page first finds the score its first
row has, by a search over scores that counts (a few script calls per shard), and reads
from that score on.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, Self

from django.core.exceptions import MultipleObjectsReturned
from django.db.models import Q

from ..conf import get_ledger
from ..core.ledger import Ledger
from ..core.records import State, ms_to_datetime
from ..core.scripts import source
from ..models import LedgerEntry
from .lookups import ALL_STATES, SCORE_FIELD, Spec, UnsupportedLookup, join_key

__all__ = ["MAX_MATERIALIZE", "LedgerQuery", "RecordQuery", "run_script"]

#: Most rows a query hands out whole (iteration, ``list()``): pages are far smaller.
MAX_MATERIALIZE = 10_000
#: On a sharded queue, a page that ends within this many rows of its state's first is
#: merged from each shard's first rows; a deeper one first searches its start's score.
DIRECT_MERGE = 1000
#: Scores each step of that search counts at (per shard, in one script call).
SEARCH_WIDTH = 256
_MS_LIMIT = 2**53  # the widest scores the admin's bounds allow (``lookups.to_ms``)
Segment = tuple[State, int | None, int | None]
_BY_LETTER = {state.letter: state for state in ALL_STATES}
_ORDER_FIELDS = frozenset({"score", *SCORE_FIELD.values()})


def run_script(ledger: Ledger, name: str, args: Sequence[Any]) -> Any:
    """Run one of the admin's scripts (``django_ledger/lua/<name>.lua``) on one shard.

    ``ledger`` is a one-shard ledger: a plain queue's, or one of ``ledger.shards``.
    """
    script = ledger.redis.register_script(source(name))
    return ledger.run(script, args)


class _QueryInfo:
    """The parts of ``QuerySet.query`` that ``ChangeList`` reads."""

    select_related = False

    def __init__(self, order_by: tuple[str, ...]) -> None:
        self.order_by = order_by


class LedgerQuery:
    """The QuerySet subset the admin needs, over one or more queues in Redis."""

    ordered = True
    totally_ordered = True

    def __init__(self, model: type[LedgerEntry], spec: Spec, order_by: Sequence[Any] = ()) -> None:
        self.model = model
        self.spec = spec
        self.query = _QueryInfo(tuple(order_by))
        self._total: int | None = None
        self._cached_rows: list[LedgerEntry] | None = None
        self._ledgers: dict[str, Ledger] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec}>"

    # -- building -------------------------------------------------------------------

    def _with(self, spec: Spec | None = None, order_by: Sequence[Any] | None = None) -> Self:
        clone = type(self)(
            self.model,
            self.spec if spec is None else spec,
            self.query.order_by if order_by is None else order_by,
        )
        clone._ledgers = self._ledgers
        return clone

    def _clone(self) -> Self:
        # The same spec selects the same rows: the clone keeps what was read (the
        # ChangeList clones its query to list a page that holds every result).
        clone = self._with()
        clone.__dict__.update({k: v for k, v in self.__dict__.items() if k.startswith("_cached")})
        clone._total = self._total
        return clone

    def all(self) -> Self:
        return self._with()

    def none(self) -> Self:
        return self._with(spec=Spec(queues=(), empty=True))

    def using(self, alias: str | None) -> Self:
        return self

    def distinct(self, *fields: str) -> Self:
        # Every record is listed once: nothing here can duplicate a row.
        return self._with()

    def select_related(self, *fields: str) -> Self:
        return self._with()

    def filter(self, *args: Q, **kwargs: Any) -> Self:
        spec = self.spec
        for q in args:
            if not isinstance(q, Q):
                raise UnsupportedLookup(f"unsupported filter {q!r}")
            spec = spec.narrow_q(q)
        for lookup, value in kwargs.items():
            spec = spec.narrow(lookup, value)
        self.check_spec(spec)
        return self._with(spec=spec)

    def exclude(self, *args: Any, **kwargs: Any) -> Self:
        raise UnsupportedLookup("the ledger admin cannot exclude records")

    def order_by(self, *fields: Any) -> Self:
        descending = False
        for name in fields:
            # The indexes sort by score alone; other fields (the pk tie-break the
            # ChangeList appends) cannot change the order and are ignored.
            if isinstance(name, str) and name.lstrip("-") in _ORDER_FIELDS:
                descending = name.startswith("-")
                break
        return self._with(spec=replace(self.spec, descending=descending), order_by=fields)

    def check_spec(self, spec: Spec) -> None:
        """Refuse lookups this kind of query cannot answer."""

    # -- reading --------------------------------------------------------------------

    def ledger(self, queue: str) -> Ledger:
        if queue not in self._ledgers:
            self._ledgers[queue] = get_ledger(queue)
        return self._ledgers[queue]

    def count(self) -> int:
        if self._total is None:
            self._total = self.total()
        return self._total

    def exists(self) -> bool:
        return self.count() > 0

    def __len__(self) -> int:
        return self.count()

    def __bool__(self) -> bool:
        return self.exists()

    def __iter__(self) -> Iterator[LedgerEntry]:
        if self._cached_rows is None:
            total = self.count()
            if total > MAX_MATERIALIZE:
                raise UnsupportedLookup(
                    f"{total} records match: narrow the filter to at most {MAX_MATERIALIZE}"
                )
            self._cached_rows = self.rows(0, total)
        return iter(self._cached_rows)

    def __getitem__(self, k: int | slice) -> Any:
        if isinstance(k, int):
            if k < 0:
                raise ValueError("negative indexing is not supported")
            rows = self.rows(k, k + 1)
            if not rows:
                raise IndexError("record query index out of range")
            return rows[0]
        if not isinstance(k, slice) or k.step not in (None, 1):
            raise TypeError("record queries take an index or a slice without a step")
        start = k.start or 0
        stop = self.count() if k.stop is None else k.stop
        if start < 0 or stop < 0:
            raise ValueError("negative indexing is not supported")
        if stop <= start:
            return []
        return self.rows(start, stop)

    def get(self, *args: Q, **kwargs: Any) -> LedgerEntry:
        rows = self.filter(*args, **kwargs)[:2]
        if not rows:
            raise self.model.DoesNotExist(
                f"{self.model._meta.object_name} matching query does not exist."
            )
        if len(rows) > 1:
            raise MultipleObjectsReturned(f"more than one {self.model._meta.object_name} matched")
        row: LedgerEntry = rows[0]
        return row

    # -- what each kind of query implements -------------------------------------------

    def total(self) -> int:
        raise NotImplementedError

    def rows(self, start: int, stop: int) -> list[LedgerEntry]:
        raise NotImplementedError


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
        keys = ledger.keys
        index_key = {State.PENDING: ledger.ready_key, State.CLAIMED: ledger.leases_key}
        index_key.update(ledger.terminal_keys)
        args: list[Any] = []
        for state, low, high in self.spec.segments() if segments is None else segments:
            args += (
                keys.index(index_key[state]) + 1,
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
                args = ["rank", offset, want, self._desc, *self.segment_args(ledger)]
                reply = run_script(ledger, "admin_page", args)
                out += self.build(queue, reply[1])
            want -= min(want, count - offset)
            offset = 0
        return out

    def sharded_rows(self, queue: str, ledger: Ledger, offset: int, want: int) -> list[LedgerEntry]:
        """Rows ``[offset, offset + want)`` of a sharded queue: its shards' merged by state."""
        per_shard = self._cached_shard_counts[queue]
        out: list[LedgerEntry] = []
        for position, (state, low, high) in enumerate(self.spec.segments()):
            total = sum(counts[position] for counts in per_shard)
            if want <= 0:
                break
            if offset >= total:
                offset -= total
                continue
            end = min(total, offset + want)
            segment: Segment = (state, low, high)
            counts = [shard_counts[position] for shard_counts in per_shard]
            skipped = 0
            if end > DIRECT_MERGE:
                segment, skipped, counts = self._skip_to(ledger, segment, offset, counts)
            streams = []
            for shard, count in zip(ledger.shards, counts, strict=True):
                if count <= 0:
                    continue
                segment_args = self.segment_args(shard, [segment])
                args = ["rank", 0, min(end - skipped, count), self._desc, *segment_args]
                streams.append(
                    self._keyed(self.build(queue, run_script(shard, "admin_page", args)[1]))
                )
            merged = heapq.merge(*streams, key=lambda pair: pair[0], reverse=self.spec.descending)
            out += [row for _, row in merged][offset - skipped : end - skipped]
            want -= end - offset
            offset = 0
        return out

    def _skip_to(
        self, ledger: Ledger, segment: Segment, offset: int, counts: list[int]
    ) -> tuple[Segment, int, list[int]]:
        """Narrow ``segment`` to start at the score of its row of merged rank ``offset``.

        Returns the narrowed segment, how many rows of the whole segment come before it,
        and each shard's count of rows in it. The score is found by a search over the
        scores, ``SEARCH_WIDTH`` at a time (one counting script call per shard per step,
        seven steps at most), so a deep page reads only its own rows (and those that
        share the first one's score) instead of every row before it.
        """
        state, low, high = segment
        descending = self.spec.descending
        lo = -_MS_LIMIT if low is None else low
        hi = _MS_LIMIT if high is None else high
        # Per shard, the rows before the search range in the listing's order.
        before = [0] * len(counts)
        while lo < hi:
            ranges: list[Segment]
            if descending:
                points = sorted({hi - (hi - lo) * k // SEARCH_WIDTH for k in range(SEARCH_WIDTH)})
                points.reverse()  # highest first: the listing's order
                ranges = [(state, point, high) for point in points]
            else:
                points = sorted({lo + (hi - lo) * k // SEARCH_WIDTH for k in range(SEARCH_WIDTH)})
                ranges = [(state, low, point) for point in points]
            # at[s][k]: rows of shard s up to points[k], in the listing's order.
            at = []
            for shard in ledger.shards:
                args = ["rank", 0, 0, self._desc, *self.segment_args(shard, ranges)]
                at.append([int(n) for n in run_script(shard, "admin_page", args)[0]])
            found = next(
                (k for k in range(len(points)) if sum(row[k] for row in at) > offset), None
            )
            if found is None:
                last = len(points) - 1
                before = [row[last] for row in at]
                if descending:
                    hi = points[last] - 1
                else:
                    lo = points[last] + 1
                continue
            if found > 0:
                before = [row[found - 1] for row in at]
            if descending:
                lo = points[found]
                if found > 0:
                    hi = points[found - 1] - 1
            else:
                hi = points[found]
                if found > 0:
                    lo = points[found - 1] + 1
        narrowed: Segment = (state, low, lo) if descending else (state, lo, high)
        left = [count - done for count, done in zip(counts, before, strict=True)]
        return narrowed, sum(before), left

    @staticmethod
    def _keyed(rows: list[LedgerEntry]) -> list[tuple[tuple[int, str], LedgerEntry]]:
        """Key one shard's rows for the merge: (score, id), as a sorted set orders them.

        A row without a score (bytes that do not decode) takes the score of the row
        before it (or after it, first in the page), so the merge leaves it where its
        shard's index put it.
        """
        score = next((row.score for row in rows if row.score is not None), 0)
        keyed = []
        for row in rows:
            if row.score is not None:
                score = row.score
            keyed.append(((score, row.request_id), row))
        return keyed

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
        """Turn ``admin_page.lua`` rows (11 values each) into model instances."""
        rows = []
        for i in range(0, len(flat), 11):
            raw_id, letter, due, lease, attempts, fence, created, updated, owner, trace, size = (
                flat[i : i + 11]
            )
            request_id = raw_id.decode("utf-8", "replace")
            state = _BY_LETTER.get(letter)
            row = self.model(
                key=join_key(queue, request_id),
                request_id=request_id,
                queue=queue,
                size=int(size),
            )
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
