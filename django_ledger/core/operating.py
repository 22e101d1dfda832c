"""The operator's gate (no claim while it is closed) and the import of records (offline
migration)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from . import fused, reference
from .ledger_base import LedgerBase
from .records import Record, encode_record
from .results import Admission
from .transport import batches

__all__ = ["close_gate", "gate_closed", "import_many", "open_gate"]


def close_gate(ledger: LedgerBase) -> None:
    ledger.runner.write("SET", ledger.gate_key, b"closed")


def open_gate(ledger: LedgerBase) -> None:
    ledger.runner.write("DEL", ledger.gate_key)


def gate_closed(ledger: LedgerBase) -> bool:
    with ledger.translate_errors():
        return bool(ledger.redis.exists(ledger.gate_key))


def import_many(ledger: LedgerBase, items: Iterable[Mapping[str, Any]]) -> list[Admission]:
    """Import records given as field mappings, in bounded batches; answers in order.

    Every item is validated before anything is written: a bad one raises
    ``ValueError`` naming the field, and nothing of the call is stored.
    """
    from .importing import prepare_import  # local: import formats are not hot

    now = ledger.server_time_ms()
    ready: list[tuple[Record, bytes, frozenset[str]]] = []
    for fields in items:
        record, given = prepare_import(fields, now, ledger.max_payload_bytes)
        ready.append((record, encode_record(record), given))
    results: list[Admission] = []
    for batch in batches(ready, lambda item: len(item[1])):
        if ledger.optimized:
            results += fused.import_records(ledger.runner, batch, ledger.max_records)
        else:
            results += [
                reference.import_one(ledger.runner, record, raw, given, ledger.max_records)
                for record, raw, given in batch
            ]
    return results
