"""Reads: records, stored results and the queue's counters."""

from __future__ import annotations

from collections.abc import Iterable

from .ledger_base import LedgerBase
from .records import Record, decode_record
from .results import Stats

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
    reply = ledger.run(ledger.scripts.stats, [])
    (
        now,
        due,
        later,
        claimed,
        expired,
        completed,
        failed,
        dead,
        quarantined,
        total,
        gate,
        oldest,
    ) = reply
    return Stats(
        pending_due=due,
        pending_later=later,
        claimed=claimed,
        expired_leases=expired,
        completed=completed,
        failed=failed,
        dead=dead,
        quarantined=quarantined,
        total=total,
        gate_closed=bool(gate),
        now=now,
        oldest_due_at=None if oldest < 0 else oldest,
    )
