"""The API's ViewSets, one module per part of the contract."""

from .admissions import AdmissionViewSet
from .claims import ClaimViewSet
from .dispatch import DispatchViewSet
from .queues import QuarantineViewSet, QueueViewSet
from .records import RecordViewSet
from .results import TaskResultViewSet
from .schema import DocsView, SchemaView
from .token import TokenView

__all__ = [
    "AdmissionViewSet",
    "ClaimViewSet",
    "DispatchViewSet",
    "DocsView",
    "QuarantineViewSet",
    "QueueViewSet",
    "RecordViewSet",
    "SchemaView",
    "TaskResultViewSet",
    "TokenView",
]
