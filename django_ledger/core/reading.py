"""Reads: records, stored results and the queue's counters."""

from __future__ import annotations

from collections.abc import Iterable

from .ledger_base import LedgerBase
from .records import Record, decode_record
from .results import STATS_COUNTS, Stats

__all__ = ["resolve_many", "results", "stats"]


def results(ledger: LedgerBase, request_ids: Iterable[str]) -> list[bytes | None]:
    """Return the results stored with settlements, in input order (``None``: none)."""
    return ledger._read_fields(ledger.results_key, list(request_ids))


def resolve_many(ledger: LedgerBase, request_ids: Iterable[str]) -> list[Record | None]:
    """Return verified records in input order, without a round trip per id."""
    ids = list(request_ids)
    raws = ledger._read_fields(ledger.records_key, ids)
    return [
        None if raw is None else decode_record(request_id, raw)
        for request_id, raw in zip(ids, raws, strict=True)
    ]


def stats(ledger: LedgerBase) -> Stats:
    """Read the queue's counters in one consistent snapshot, with no scan of records."""
    # stats.lua's reply: the clock, the counts in ``Stats``' order, the gate, the earliest
    # due time of a PENDING record (-1: none).
    now, *counts, gate, oldest = ledger.run(ledger.scripts.stats, [])
    return Stats(
        **dict(zip(STATS_COUNTS, counts, strict=True)),
        gate_closed=bool(gate),
        now=now,
        oldest_due_at=None if oldest < 0 else oldest,
    )
