"""The ledger's admin: records, quarantine and queue health, read straight from Redis.

Importing this package registers ``RecordAdmin``, ``QuarantinedRecordAdmin`` and
``QueueAdmin`` on the default admin site (Django's admin autodiscovery does it).
"""

from __future__ import annotations

from .quarantine import QuarantinedRecordAdmin
from .queues import QueueAdmin
from .records import RecordAdmin
from .schedules import ScheduleAdmin
from .workers import WorkerAdmin

__all__ = ["QuarantinedRecordAdmin", "QueueAdmin", "RecordAdmin", "ScheduleAdmin", "WorkerAdmin"]
