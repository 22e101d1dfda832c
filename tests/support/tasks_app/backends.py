"""A task backend that is neither the ledger nor one of Django's two in-memory ones."""

from __future__ import annotations

from typing import Any

from django_ledger.tasks.compat import BaseTaskBackend


class ElsewhereBackend(BaseTaskBackend):
    """Stands for a third-party backend (a database one, say): it only refuses."""

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        raise NotImplementedError("never enqueued in these tests")
