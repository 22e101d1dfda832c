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
    "CancelOutcome",
    "Cancelled",
    "Effects",
    "EnqueueOutcomeUnknown",
    "LeaseExpired",
    "LedgerBackend",
    "LedgerTask",
    "LedgerTaskContext",
    "NotRun",
    "QueueFull",
    "ResultTooLarge",
    "RetryAfter",
    "StaleAttempt",
    "TaskIdConflict",
    "UnknownTask",
    "aenqueue_many",
    "aenqueue_once",
    "cancel",
    "effects",
    "enqueue_many",
    "enqueue_once",
    "flush_outbox",
    "task",
]

#: Each name's module (relative to this package) and its name there.
_HOMES = {
    "LedgerBackend": (".backend", "LedgerBackend"),
    "LedgerTask": (".ledger_task", "LedgerTask"),
    "LedgerTaskContext": (".ledger_task", "LedgerTaskContext"),
    "task": (".ledger_task", "task"),
    "enqueue_once": (".calls", "enqueue_once"),
    "aenqueue_once": (".calls", "aenqueue_once"),
    "enqueue_many": (".calls", "enqueue_many"),
    "aenqueue_many": (".calls", "aenqueue_many"),
    "effects": (".fencing", "effects"),
    "Effects": ("..outbox.effects", "Effects"),
    "StaleAttempt": ("..outbox.effects", "StaleAttempt"),
    # Waits for the courier's deliveries of committed outbox rows.
    "flush_outbox": ("..outbox.courier", "flush"),
    "EnqueueOutcomeUnknown": (".exceptions", "EnqueueOutcomeUnknown"),
    "Cancelled": (".exceptions", "Cancelled"),
    "cancel": (".cancelling", "cancel"),
    "CancelOutcome": (".cancelling", "CancelOutcome"),
    "LeaseExpired": (".exceptions", "LeaseExpired"),
    "NotRun": (".exceptions", "NotRun"),
    "QueueFull": (".exceptions", "QueueFull"),
    "ResultTooLarge": (".exceptions", "ResultTooLarge"),
    "RetryAfter": (".exceptions", "RetryAfter"),
    "TaskIdConflict": (".exceptions", "TaskIdConflict"),
    "UnknownTask": (".exceptions", "UnknownTask"),
}

if TYPE_CHECKING:
    from ..outbox.courier import flush as flush_outbox
    from ..outbox.effects import Effects, StaleAttempt
    from .backend import LedgerBackend
    from .calls import aenqueue_many, aenqueue_once, enqueue_many, enqueue_once
    from .cancelling import CancelOutcome, cancel
    from .exceptions import (
        Cancelled,
        EnqueueOutcomeUnknown,
        LeaseExpired,
        NotRun,
        QueueFull,
        ResultTooLarge,
        RetryAfter,
        TaskIdConflict,
        UnknownTask,
    )
    from .fencing import effects
    from .ledger_task import LedgerTask, LedgerTaskContext, task


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = home
    value = getattr(importlib.import_module(module, __name__), attribute)
    globals()[name] = value
    return value
