"""One page of a sharded queue's records, merged from its shards in index order.

A sharded queue (``SHARDS`` > 1) is listed as one queue: its counts are the sums of
its shards', and a page of one state merges the shards' rows in index order (score,
then id, as one sorted set orders them). That merge reads, from each shard, the rows
of that state up to the end of the page; a deeper page first finds the score its first
row has, by a search over scores that counts (a few script calls per shard), and reads
from that score on.

The functions here know nothing of scripts: the caller hands them a ``read`` (a
shard's first rows of a segment) and a ``count`` (a shard's rows up to each of some
segments' ends), one script call each.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence

from ..core.ledger import Ledger
from ..core.records import State
from ..models import LedgerEntry
from .query import spans

__all__ = ["DIRECT_MERGE", "SEARCH_WIDTH", "Segment", "merged_rows"]

#: On a sharded queue, a page that ends within this many rows of its state's first is
#: merged from each shard's first rows; a deeper one first searches its start's score.
DIRECT_MERGE = 1000
#: Scores each step of that search counts at (per shard, in one script call).
SEARCH_WIDTH = 256
_MS_LIMIT = 2**53  # the widest scores the admin's bounds allow (``lookups.to_ms``)
#: One state's index, between two scores (``None``: unbounded).
Segment = tuple[State, int | None, int | None]
#: ``read(shard, segment, limit)``: the shard's first ``limit`` rows of ``segment``.
Read = Callable[[Ledger, Segment, int], list[LedgerEntry]]
#: ``count(shard, segments)``: how many rows the shard has in each of ``segments``.
Count = Callable[[Ledger, Sequence[Segment]], list[int]]


def merged_rows(
    shards: Sequence[Ledger],
    segments: Sequence[Segment],
    per_shard: Sequence[Sequence[int]],
    span: tuple[int, int],
    descending: bool,
    read: Read,
    count: Count,
) -> list[LedgerEntry]:
    """Rows ``[offset, offset + want)`` of a sharded queue: its shards' merged by state.

    ``per_shard[s][k]`` is how many rows shard ``s`` has in ``segments[k]``; ``span`` is
    ``(offset, want)``.
    """
    out: list[LedgerEntry] = []
    totals = [sum(counts[position] for counts in per_shard) for position in range(len(segments))]
    for position, offset, want in spans(enumerate(totals), *span):
        end = min(totals[position], offset + want)
        counts = [shard_counts[position] for shard_counts in per_shard]
        segment, skipped = segments[position], 0
        if end > DIRECT_MERGE:
            segment, skipped, counts = _skip_to(shards, segment, offset, counts, descending, count)
        streams = [
            _keyed(read(shard, segment, min(end - skipped, n)))
            for shard, n in zip(shards, counts, strict=True)
            if n > 0
        ]
        merged = heapq.merge(*streams, key=lambda pair: pair[0], reverse=descending)
        out += [row for _, row in merged][offset - skipped : end - skipped]
    return out


def _skip_to(
    shards: Sequence[Ledger],
    segment: Segment,
    offset: int,
    counts: list[int],
    descending: bool,
    count: Count,
) -> tuple[Segment, int, list[int]]:
    """Narrow ``segment`` to start at the score of its row of merged rank ``offset``.

    Returns the narrowed segment, how many rows of the whole segment come before it,
    and each shard's count of rows in it. The score is found by a search over the
    scores, ``SEARCH_WIDTH`` at a time (one counting script call per shard per step,
    seven steps at most), so a deep page reads only its own rows (and those that
    share the first one's score) instead of every row before it.
    """
    state, low, high = segment
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
        at = [count(shard, ranges) for shard in shards]
        found = next((k for k in range(len(points)) if sum(row[k] for row in at) > offset), None)
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
    left = [n - done for n, done in zip(counts, before, strict=True)]
    return narrowed, sum(before), left


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
