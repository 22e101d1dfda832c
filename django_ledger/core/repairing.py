"""Repair: the sweep of the indexes and the HSCAN pages of records."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import fused, reference
from .answers import REPAIR_FIELDS
from .arguments import positive_int
from .ledger_base import LedgerBase
from .results import RepairReport
from .transport import batches, scanned_id

__all__ = ["parse_cursor", "repair_page", "repair_records", "scan_page", "sweep"]


def repair_page(ledger: LedgerBase, cursor: str | int = "0", count: int = 100) -> RepairReport:
    """Repair one HSCAN page and say what it did, with the next cursor.

    Before the page, a sweep of the indexes repairs every expired lease and every
    record past its retention (up to ``count`` of each) wherever the scan stands,
    and drops index entries whose record is gone; the page's ``scanned`` counts
    the scanned records only.
    """
    _, inner = parse_cursor(cursor)
    positive_int(count, "count", upper=10_000)
    report = sweep(ledger, count)
    report.add(scan_page(ledger, inner, count))
    return report


def parse_cursor(cursor: object, shards: int = 0) -> tuple[int, int]:
    """A repair cursor as ``(shard, HSCAN cursor)``; ``TypeError``/``ValueError`` if none.

    ``shards`` 0: a one-shard queue's cursor, the HSCAN cursor alone; else a sharded
    queue's, ``"<shard>.<cursor>"`` (or the cursor alone: shard 0).
    """
    if isinstance(cursor, bool) or not isinstance(cursor, str | int):
        raise TypeError(f"cursor must be a str, not {type(cursor).__name__}")
    text = str(cursor)
    shard, dot, inner = text.partition(".") if shards else ("", "", text)
    if not dot:
        shard, inner = "0", text
    # HSCAN's cursors are unsigned 64-bit: a larger one is refused here, before the
    # sweep writes anything, not by Redis halfway through the page.
    if (
        not (shard.isdecimal() and inner.isdecimal())
        or len(inner) > 20
        or int(inner) >= 2**64
        or int(shard) >= max(shards, 1)
    ):
        raise ValueError(f"cursor must be a cursor returned by repair, got {cursor!r}")
    return int(shard), int(inner)


def sweep(ledger: LedgerBase, count: int = 100) -> RepairReport:
    """Repair up to ``count`` expired leases and records past retention, from the indexes.

    The first half of ``repair_page``: it reads no page of records (``scanned`` 0),
    and drops index entries whose record is gone.
    """
    positive_int(count, "count", upper=10_000)
    swept = ledger.run(ledger.scripts.sweep, [ledger.retention_ms, count, ledger.max_retained])
    report = repair_records(ledger, zip(swept[2::2], swept[3::2], strict=True))
    report.reindexed += swept[0]
    report.purged += swept[1]
    report.scanned = 0
    return report


def scan_page(ledger: LedgerBase, cursor: int, count: int) -> RepairReport:
    """Repair one HSCAN page of records from ``cursor``; the report holds the next one."""
    with ledger.translate_errors():
        next_cursor, page = ledger.redis.hscan(ledger.records_key, cursor, count=count)
    return repair_records(ledger, page.items(), str(next_cursor))


def repair_records(
    ledger: LedgerBase, observed: Iterable[tuple[Any, bytes]], cursor: str = "0"
) -> RepairReport:
    """Repair records against the bytes the caller read (a stale read changes nothing)."""
    pairs = [(scanned_id(request_id), raw) for request_id, raw in observed]
    report = RepairReport(cursor=cursor, scanned=len(pairs))
    for batch in batches(pairs, lambda item: len(item[0]) + len(item[1])):
        path = fused if ledger.optimized else reference
        codes = path.repair(ledger.runner, batch, ledger.retention_ms, ledger.max_attempts)
        for code in codes:
            field = REPAIR_FIELDS.get(code)
            if field is not None:
                setattr(report, field, getattr(report, field) + 1)
    return report
