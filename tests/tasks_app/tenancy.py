"""Tasks of the queue-group tests: one per queue, one declared for several, one with limits.

``MultiQueueTask`` stands for ``LedgerTask`` with its ``queues`` option: the handler
reads ``task.queues`` (``django_ledger.tasks.options.declared_queues``), whatever class
carries it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django_ledger.tasks import LedgerTask
from django_ledger.tasks import task as ledger_task
from django_ledger.tasks.compat import task
from django_ledger.tasks.options import normalize_queues


@dataclass(frozen=True, slots=True, kw_only=True)
class MultiQueueTask(LedgerTask):
    """A ``LedgerTask`` that declares the queues it may run from besides its own."""

    queues: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if self.queues is not None:
            object.__setattr__(self, "queues", normalize_queues(self.queues))
        LedgerTask.__post_init__(self)


@task(queue_name="emails")
def emails_only(value: int) -> int:
    """A task of queue ``emails``: a worker of another queue must refuse to run it."""
    from django_ledger.conf import connection, ledger_settings

    connection().incr(f"{ledger_settings.namespace}:emails_only-ran")
    return value


def both(value: int) -> int:
    return value


#: Declared for ``emails`` and ``reports`` (as ``@task(queues=[...])`` would).
both = MultiQueueTask(  # type: ignore[no-redef]
    func=both, queue_name="emails", queues=("emails", "reports"), backend="default"
)


@ledger_task(timeout=2, max_attempts=3, lease=3, backoff_base=0.5, backoff_cap=1)
def bounded(*args: Any) -> int:
    """A task with declared limits that a payload may only tighten."""
    return len(args)
