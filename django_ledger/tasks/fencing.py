"""A task's fenced effects: ``effects(context)``, on the backend's ``DATABASE``.

The compare-and-set on the effects table is ``outbox/effects.py``'s ``fenced``; this is
the face a ``takes_context`` task uses, which knows its task id, its claim's fence and
its backend. ``docs/transactions.md`` is the guide.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

from ..outbox.effects import Effects, fenced
from .backend import LedgerBackend
from .compat import task_backends

__all__ = ["effects"]


def effects(context: Any, *, using: str | None = None) -> AbstractContextManager[Effects]:
    """Run the block's writes in one transaction, fenced by the attempt's claim.

    ``context`` is a ``takes_context`` task's ``LedgerTaskContext``; ``using`` a database
    alias (default: the backend's ``DATABASE`` option). Raises ``StaleAttempt`` when a
    later claim wrote first or holds the row; the block's writes then roll back.
    """
    if using is None:
        backend = task_backends[context.task_result.backend]
        using = backend.transactions.database if isinstance(backend, LedgerBackend) else "default"
    return fenced(context.task_result.id, int(context.fence), using)
