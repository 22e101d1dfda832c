"""The outbox's tables: tasks waiting for their admission, and tasks' fenced effects."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

__all__ = ["OutboxEntry", "OutboxKind", "TaskEffect"]


class OutboxKind(models.TextChoices):
    """What an outbox row carries, so what its delivery admits."""

    #: One task: its payload is admitted with ``admit_many`` (``outbox/delivery.py``).
    TASK = "task", "task"
    #: A whole workflow, admitted in one call (``outbox/workflow_rows.py``).
    WORKFLOW = "workflow", "workflow"


class OutboxEntry(models.Model):
    """A task enqueued inside a transaction, waiting to be admitted to its queue.

    Written in the caller's transaction, so it exists iff that transaction committed;
    the committer admits and deletes it on commit, a relay whatever a crash left behind.
    """

    #: The task id, made before the write: admission is idempotent by it.
    id = models.CharField("task id", primary_key=True, max_length=256)
    backend = models.CharField("task backend", max_length=100)
    queue = models.CharField("queue", max_length=100)
    payload = models.TextField("payload")
    #: A ``timedelta`` run_after: the delay from the admission, in milliseconds.
    delay_ms = models.BigIntegerField("delay (ms)", default=0)
    #: A datetime run_after, epoch milliseconds (the due time on the Redis clock).
    run_after_ms = models.BigIntegerField("run after (epoch ms)", null=True, blank=True)
    priority = models.SmallIntegerField("priority", default=0)
    created_at = models.DateTimeField("created at", default=timezone.now, db_index=True)
    #: Where it is meant to go: the namespace and Redis of the settings that wrote it
    #: (``outbox/target.py``); "" for rows written before rows had one: any relay's.
    #: A default in the database too, so a process of the version before still writes.
    target = models.CharField("target", max_length=255, blank=True, default="", db_default="")
    #: What the row carries; the delivery reads it, never the payload.
    kind = models.CharField(
        "kind",
        max_length=16,
        choices=OutboxKind.choices,
        default=OutboxKind.TASK,
        db_default=OutboxKind.TASK,
    )

    #: The W3C trace context of the enqueue ("" for none): the record carries it, and the
    #: worker's span continues that trace. A default in the database too, as ``target``.
    traceparent = models.CharField(
        "traceparent", max_length=55, blank=True, default="", db_default=""
    )

    class Meta:
        db_table = "django_ledger_outbox"
        default_permissions = ()  # internal tables: no admin page, no permission
        ordering = ["created_at"]
        #: The relay's walk: one target's rows, oldest first, from where it stopped.
        indexes = [
            models.Index(fields=["target", "created_at", "id"], name="django_ledger_outbox_relay")
        ]
        verbose_name = "outbox entry"
        verbose_name_plural = "outbox entries"

    def __str__(self) -> str:
        return self.id


class TaskEffect(models.Model):
    """A task's fenced effects: the highest fence that wrote them, and whether they are done.

    Written by ``django_ledger.tasks.effects`` in the task's own transaction, by
    compare-and-set on ``fence``: an attempt with a lower fence is refused.
    """

    task_id = models.CharField("task id", primary_key=True, max_length=256)
    fence = models.BigIntegerField("fence")
    done = models.BooleanField("done", default=False)
    #: The task's JSON return value, once done (``null`` JSON for ``None``).
    result = models.TextField("result", blank=True, default="")
    updated_at = models.DateTimeField("updated at", default=timezone.now, db_index=True)

    class Meta:
        db_table = "django_ledger_task_effect"
        default_permissions = ()  # internal tables: no admin page, no permission
        verbose_name = "task effect"
        verbose_name_plural = "task effects"

    def __str__(self) -> str:
        return f"{self.task_id} (fence {self.fence})"
