"""The operator's part: the gate, and the import of records (offline migration)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from . import fused, reference
from .ledger_base import LedgerBase
from .records import Record, State, encode_record
from .results import Admission
from .transport import batches

__all__ = ["Operating"]


class Operating(LedgerBase):
    """A ledger's gate and import."""

    def close_gate(self) -> None:
        """Hold the queue closed: no claim succeeds until ``open_gate``."""
        self.runner.write("SET", self.gate_key, b"closed")

    def open_gate(self) -> None:
        self.runner.write("DEL", self.gate_key)

    @property
    def gate_closed(self) -> bool:
        with self.translate_errors():
            return bool(self.redis.exists(self.gate_key))

    def import_record(
        self,
        request_id: str,
        payload: str,
        state: State,
        due_at: int,
        owner: str = "",
        **extra: Any,
    ) -> Admission:
        """Write one record as given (offline migration: only while the gate is closed).

        ``extra`` may carry ``attempts``, ``fence``, ``lease_until``, ``created_at``,
        ``updated_at`` and ``traceparent``. An existing id must agree exactly with every
        field given (``DUPLICATE``), or it is a ``CONFLICT``.
        """
        fields = {"request_id": request_id, "payload": payload, "state": state, "due_at": due_at}
        fields["owner"] = owner
        fields.update(extra)
        return self.import_many([fields])[0]

    def import_many(self, items: Iterable[Mapping[str, Any]]) -> list[Admission]:
        """Import records given as field mappings, in bounded batches; answers in order.

        Every item is validated before anything is written: a bad one raises
        ``ValueError`` naming the field, and nothing of the call is stored.
        """
        from .importing import prepare_import  # local: import formats are not hot

        now = self.server_time_ms()
        results: list[Admission | None] = []
        ready: list[tuple[int, Record, bytes, frozenset[str]]] = []
        for fields in items:
            record, given = prepare_import(fields, now, self.max_payload_bytes)
            ready.append((len(results), record, encode_record(record), given))
            results.append(None)
        for batch in batches(ready, lambda item: len(item[2])):
            if self.optimized:
                answers = fused.import_records(self.runner, batch, self.max_records)
            else:
                answers = [
                    reference.import_one(self.runner, record, raw, given, self.max_records)
                    for _, record, raw, given in batch
                ]
            for (position, *_), answer in zip(batch, answers, strict=True):
                results[position] = answer
        return [result for result in results if result is not None]
