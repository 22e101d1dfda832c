"""The API's ViewSets, one module per part of the contract."""

from .admissions import AdmissionViewSet
from .claims import ClaimViewSet
from .dispatch import DispatchViewSet
from .queues import QuarantineViewSet, QueueViewSet
from .records import RecordViewSet
from .schema import DocsView, SchemaView

__all__ = [
    "AdmissionViewSet",
    "ClaimViewSet",
    "DispatchViewSet",
    "DocsView",
    "QuarantineViewSet",
    "QueueViewSet",
    "RecordViewSet",
    "SchemaView",
]
