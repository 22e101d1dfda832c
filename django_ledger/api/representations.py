"""Records, admissions and settlements as the API answers them.

Built directly, without DRF's per-field machinery: they are on every hot path (admit,
claim, settle, list). The serializers in ``serializers.py`` document the same shapes in
the schema, and a test holds each function to its serializer's output.
"""

from __future__ import annotations

from typing import Any

from ..core.importing import record_to_fields
from ..core.records import Record
from ..core.results import Admission, Settlement

__all__ = ["admission_data", "record_data", "settlement_data"]


def record_data(record: Record) -> dict[str, Any]:
    """Return ``record`` as ``RecordSerializer`` documents it: the export format's fields."""
    return record_to_fields(record)


def admission_data(admission: Admission) -> dict[str, Any]:
    """Return ``admission`` as ``AdmissionSerializer`` documents it: its id, then what a
    settlement answers."""
    return {"request_id": admission.request_id, **settlement_data(admission)}


def settlement_data(settlement: Settlement | Admission) -> dict[str, Any]:
    """Return ``settlement`` as ``SettlementSerializer`` documents it."""
    record = settlement.record
    return {
        "status": settlement.status.value,
        "reason": settlement.reason,
        "record": None if record is None else record_data(record),
    }
