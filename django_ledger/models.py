"""The admin's and the API's view of records held in Redis, and the outbox's tables.

``LedgerEntry`` is unmanaged (Redis is the only store); its proxies give records,
quarantined records and queues each an admin entry and permissions of their own.
Instances are built from Redis by ``django_ledger.admin.record_query`` and never saved.
The two tables of the database (``OutboxEntry``, ``TaskEffect``) live in
``django_ledger.outbox.models`` (``docs/transactions.md``).
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy

from .outbox.models import OutboxEntry, TaskEffect

__all__ = [
    "STATE_CHOICES",
    "LedgerEntry",
    "OutboxEntry",
    "QuarantinedRecord",
    "Queue",
    "Record",
    "Schedule",
    "TaskEffect",
    "Worker",
]

#: The record states, and ``CORRUPT`` for stored bytes that do not decode.
STATE_CHOICES = [
    ("PENDING", "PENDING"),
    ("CLAIMED", "CLAIMED"),
    ("COMPLETED", "COMPLETED"),
    ("FAILED", "FAILED"),
    ("DEAD", "DEAD"),
    ("CORRUPT", "CORRUPT"),
]


class LedgerEntry(models.Model):
    """One request id of one queue, as stored in Redis (the columns of a record)."""

    # A request id is unique within its queue only, so the key names both:
    # "<queue> <request id>" (queue names never hold whitespace).
    key = models.CharField(gettext_lazy("key"), primary_key=True, max_length=400)
    request_id = models.CharField(gettext_lazy("request id"), max_length=256)
    queue = models.CharField(gettext_lazy("queue"), max_length=100)
    state = models.CharField(gettext_lazy("state"), max_length=16, choices=STATE_CHOICES)
    due_at = models.DateTimeField(gettext_lazy("due at"), null=True)
    owner = models.CharField(gettext_lazy("owner"), max_length=256, blank=True)
    attempts = models.PositiveIntegerField(gettext_lazy("attempts"), default=0)
    fence = models.PositiveBigIntegerField(gettext_lazy("fence"), default=0)
    lease_until = models.DateTimeField(gettext_lazy("lease until"), null=True)
    created_at = models.DateTimeField(gettext_lazy("created at"), null=True)
    updated_at = models.DateTimeField(gettext_lazy("updated at"), null=True)
    traceparent = models.CharField(gettext_lazy("traceparent"), max_length=55, blank=True)
    payload = models.TextField(gettext_lazy("payload"), blank=True)
    size = models.PositiveBigIntegerField(gettext_lazy("size in bytes"), default=0)
    error = models.CharField(gettext_lazy("decode error"), max_length=200, blank=True)

    # Set on instances read from Redis, never stored: the record's index score (epoch
    # ms), and for a quarantined id its quarantined copy.
    score: int | None = None
    #: The task path a Django task record's payload names ('' for a raw record).
    task: str = ""
    quarantined_bytes: bytes | None = None

    class Meta:
        managed = False
        db_table = "django_ledger_entry"
        default_permissions = ()
        ordering = ["due_at"]
        verbose_name = gettext_lazy("ledger entry")
        verbose_name_plural = gettext_lazy("ledger entries")

    def __str__(self) -> str:
        return self.request_id or self.key


class Record(LedgerEntry):
    """A record of a queue."""

    class Meta:
        proxy = True
        default_permissions = ("view",)
        permissions = [
            ("admit_record", "Can admit records"),
            ("claim_record", "Can claim records"),
            ("retry_record", "Can retry records now"),
            ("fail_record", "Can mark records failed"),
            ("purge_record", "Can purge ended records"),
        ]
        verbose_name = gettext_lazy("record")
        verbose_name_plural = gettext_lazy("records")


class QuarantinedRecord(LedgerEntry):
    """A record whose stored bytes failed to decode, set aside by repair."""

    class Meta:
        proxy = True
        default_permissions = ("view",)
        permissions = [
            ("discard_quarantinedrecord", "Can discard quarantined records"),
            ("restore_quarantinedrecord", "Can restore quarantined records"),
        ]
        verbose_name = gettext_lazy("quarantined record")
        verbose_name_plural = gettext_lazy("quarantined records")


class Queue(LedgerEntry):
    """A configured queue: its health, and its gate."""

    class Meta:
        proxy = True
        default_permissions = ("view",)
        permissions = [
            ("operate_queue", "Can close and open queue gates"),
            ("limit_queue", "Can change queue flow limits"),
        ]
        verbose_name = gettext_lazy("queue")
        verbose_name_plural = gettext_lazy("queues")


class Schedule(LedgerEntry):
    """A schedule of ``LEDGER['SCHEDULES']``: its next fires, its dispatches, its pause."""

    class Meta:
        proxy = True
        default_permissions = ("view",)
        permissions = [
            ("operate_schedule", "Can pause, resume and trigger schedules"),
            ("edit_schedule", "Can create, edit and delete run-time schedules"),
        ]
        verbose_name = gettext_lazy("schedule")
        verbose_name_plural = gettext_lazy("schedules")


class Worker(LedgerEntry):
    """A running ``ledger_worker``, as its heartbeat in Redis tells it (view only)."""

    class Meta:
        proxy = True
        default_permissions = ("view",)
        verbose_name = gettext_lazy("worker")
        verbose_name_plural = gettext_lazy("workers")
