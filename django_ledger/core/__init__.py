"""The Django-free core: the ledger, its two paths, the record codec and the dispatch registry.

Everything here takes a redis-py client and plain values, and imports nothing of Django
or of the Django layer above it (``tests/project/test_layers.py`` holds it to that).
"""

from .dispatch import (
    CorruptDispatch,
    Dispatch,
    DispatchRegistry,
    DispatchUnavailable,
    MemoryDispatchRegistry,
    RedisDispatchRegistry,
)
from .errors import CorruptRecord, FusedPathOnly, LedgerError, LedgerUnavailable
from .ledger import Ledger
from .records import Record, State
from .results import (
    Admission,
    AdmissionStatus,
    Claim,
    RepairReport,
    Settlement,
    SettlementStatus,
    Stats,
)
from .transport import MAX_BATCH, MAX_BATCH_BYTES

__all__ = [
    "MAX_BATCH",
    "MAX_BATCH_BYTES",
    "Admission",
    "AdmissionStatus",
    "Claim",
    "CorruptDispatch",
    "CorruptRecord",
    "Dispatch",
    "DispatchRegistry",
    "DispatchUnavailable",
    "FusedPathOnly",
    "Ledger",
    "LedgerError",
    "LedgerUnavailable",
    "MemoryDispatchRegistry",
    "Record",
    "RedisDispatchRegistry",
    "RepairReport",
    "Settlement",
    "SettlementStatus",
    "State",
    "Stats",
]
