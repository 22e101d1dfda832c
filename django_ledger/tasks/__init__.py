"""Django's task framework on the ledger: ``django_ledger.tasks.LedgerBackend``.

``TASKS = {"default": {"BACKEND": "django_ledger.tasks.LedgerBackend"}}``, then
``@task`` and ``.enqueue()`` as Django documents them; ``manage.py ledger_worker`` runs
the tasks. ``docs/tasks.md`` is the guide. Names load on first use, so the modules that
need no task framework (``state``, ``options``) import on Django 5.2 without the backport.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "Effects",
    "EnqueueOutcomeUnknown",
    "LeaseExpired",
    "LedgerBackend",
    "LedgerTask",
    "LedgerTaskContext",
    "NotRun",
    "QueueFull",
    "ResultTooLarge",
    "StaleAttempt",
    "TaskIdConflict",
    "UnknownTask",
    "aenqueue_many",
    "aenqueue_once",
    "effects",
    "enqueue_many",
    "enqueue_once",
    "flush_outbox",
    "task",
]

_HOMES = {
    "LedgerBackend": "backend",
    "LedgerTask": "ledger_task",
    "LedgerTaskContext": "ledger_task",
    "task": "ledger_task",
    "enqueue_once": "calls",
    "aenqueue_once": "calls",
    "enqueue_many": "calls",
    "aenqueue_many": "calls",
    "Effects": "fenced",
    "StaleAttempt": "fenced",
    "effects": "fenced",
    "flush_outbox": "fenced",
    "EnqueueOutcomeUnknown": "exceptions",
    "LeaseExpired": "exceptions",
    "NotRun": "exceptions",
    "QueueFull": "exceptions",
    "ResultTooLarge": "exceptions",
    "TaskIdConflict": "exceptions",
    "UnknownTask": "exceptions",
}

if TYPE_CHECKING:
    from .backend import LedgerBackend
    from .calls import aenqueue_many, aenqueue_once, enqueue_many, enqueue_once
    from .exceptions import (
        EnqueueOutcomeUnknown,
        LeaseExpired,
        NotRun,
        QueueFull,
        ResultTooLarge,
        TaskIdConflict,
        UnknownTask,
    )
    from .fenced import Effects, StaleAttempt, effects, flush_outbox
    from .ledger_task import LedgerTask, LedgerTaskContext, task


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
