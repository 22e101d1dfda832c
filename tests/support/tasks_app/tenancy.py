"""Tasks of the queue-group tests: one per queue, one declared for several, one with limits."""

from __future__ import annotations

from typing import Any

from django_ledger.tasks import task as ledger_task
from django_ledger.tasks.compat import task


@task(queue_name="emails")
def emails_only(value: int) -> int:
    """A task of queue ``emails``: a worker of another queue must refuse to run it."""
    from django_ledger.conf import connection, ledger_settings

    connection().incr(f"{ledger_settings.namespace}:emails_only-ran")
    return value


@ledger_task(queue_name="emails", queues=["emails", "reports"])
def both(value: int) -> int:
    """Declared for ``emails`` and ``reports``: either queue's worker runs it."""
    return value


@ledger_task(timeout=2, max_attempts=3, lease=3, backoff_base=0.5, backoff_cap=1)
def bounded(*args: Any) -> int:
    """A task with declared limits that a payload may only tighten."""
    return len(args)
