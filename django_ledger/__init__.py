"""django-ledger: reliable, idempotent delivery of work on Redis.

The core (``django_ledger.core``, everything imported here) needs no Django;
``get_ledger`` and ``get_dispatch_registry`` read the ``LEDGER`` setting when called.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from .core.errors import CorruptRecord, FusedPathOnly, LedgerError, LedgerUnavailable
from .core.ledger import MAX_BATCH, MAX_BATCH_BYTES, Ledger
from .core.records import Record, State
from .core.results import (
    Admission,
    AdmissionStatus,
    Claim,
    RepairReport,
    Settlement,
    SettlementStatus,
    Stats,
)
from .core.sharded import AnyLedger

if TYPE_CHECKING:
    from .core.dispatch import DispatchRegistry

__all__ = [
    "MAX_BATCH",
    "MAX_BATCH_BYTES",
    "Admission",
    "AdmissionStatus",
    "Claim",
    "CorruptRecord",
    "FusedPathOnly",
    "Ledger",
    "LedgerError",
    "LedgerUnavailable",
    "Record",
    "RepairReport",
    "Settlement",
    "SettlementStatus",
    "State",
    "Stats",
    "get_dispatch_registry",
    "get_ledger",
]

#: The distribution that installs this package: PyPI's "django-ledger" is another project.
DISTRIBUTION = "django-task-ledger"

try:
    # pyproject.toml states the version once; the installed metadata carries it here.
    __version__ = version(DISTRIBUTION)
except PackageNotFoundError:  # run from a source tree that was never installed
    __version__ = "0+unknown"


def get_ledger(queue: str = "default") -> AnyLedger:
    """Return the ledger of ``queue`` as the ``LEDGER`` setting configures it."""
    from .conf import get_ledger as build

    return build(queue)


def get_dispatch_registry(**kwargs: Any) -> DispatchRegistry:
    """Return the dispatch registry the ``LEDGER`` setting configures."""
    from .conf import get_dispatch_registry as build

    return build(**kwargs)
