"""The API's ViewSets, one module per part of the contract."""

from .admissions import AdmissionViewSet
from .claims import ClaimViewSet
from .dispatch import DispatchViewSet
from .queues import QuarantineViewSet, QueueViewSet
from .records import RecordViewSet
from .schema import SchemaView

__all__ = [
    "AdmissionViewSet",
    "ClaimViewSet",
    "DispatchViewSet",
    "QuarantineViewSet",
    "QueueViewSet",
    "RecordViewSet",
    "SchemaView",
]
