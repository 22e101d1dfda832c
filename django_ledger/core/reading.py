"""Reads: records, stored results and the queue's counters."""

from __future__ import annotations

from collections.abc import Iterable

from .ledger_base import LedgerBase
from .records import Record, decode_record
from .results import Stats

__all__ = ["Reading"]


class Reading(LedgerBase):
    """A ledger's reads: every record verified, no round trip per id."""

    def results(self, request_ids: Iterable[str]) -> list[bytes | None]:
        """Return the results stored with settlements, in input order (``None``: none)."""
        return self._read_fields(self.results_key, list(request_ids))

    def resolve(self, request_id: str) -> Record | None:
        """Return the verified record of ``request_id``, or ``None``."""
        return self.resolve_many([request_id])[0]

    def resolve_many(self, request_ids: Iterable[str]) -> list[Record | None]:
        """Return verified records in input order, without a round trip per id."""
        ids = list(request_ids)
        raws = self._read_fields(self.records_key, ids)
        return [
            None if raw is None else decode_record(request_id, raw)
            for request_id, raw in zip(ids, raws, strict=True)
        ]

    def stats(self) -> Stats:
        """Read the queue's counters in one consistent snapshot, with no scan of records."""
        reply = self.run(self.scripts.stats, [])
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
