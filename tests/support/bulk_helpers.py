"""Set up many ended records cheaply: encoded here, written by the import script in batches.

``Ledger.import_many`` checks every field of every item in Python first; a test that needs
50,000 records builds them as records, encodes them with the ledger's codec and hands the
batches to the same import script, with the gate closed as an import requires.
"""

from __future__ import annotations

import json

from django_ledger.core import State, fused
from django_ledger.core.ledger import Ledger
from django_ledger.core.records import Record, encode_record

BATCH = 5000


def task_payload(path: str) -> str:
    """A Django task document's payload, as the task layer writes it (canonical JSON)."""
    doc = {"args": [], "kwargs": {}, "options": {}, "task": path, "v": 1}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)


def import_ended(
    ledger: Ledger,
    count: int,
    *,
    state: State = State.DEAD,
    ended_at: int,
    prefix: str = "r",
    payload: str = "{}",
    ties: int = 100,
    attempts: int = 3,
) -> list[str]:
    """Write ``count`` records ended as ``state``, ``ties`` of them per end time."""
    ids = [f"{prefix}{i:06d}" for i in range(count)]
    ledger.close_gate()
    try:
        for start in range(0, count, BATCH):
            batch = []
            for i in range(start, min(start + BATCH, count)):
                record = Record(
                    request_id=ids[i],
                    payload=payload,
                    state=state,
                    due_at=ended_at - 60_000,
                    owner="",
                    attempts=attempts,
                    fence=attempts,
                    lease_until=None,
                    created_at=ended_at - 60_000,
                    updated_at=ended_at + i // ties,
                )
                batch.append((record, encode_record(record), frozenset[str]()))
            answers = fused.import_records(ledger.runner, batch, ledger.max_records)
            assert all(a.status.name == "ADMITTED" for a in answers), answers[:3]
    finally:
        ledger.open_gate()
    return ids
