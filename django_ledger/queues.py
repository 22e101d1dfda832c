"""The process's queues: one ``Ledger`` per queue of ``LEDGER['QUEUES']``, with its task options.

The table the task backend, the worker's handlers, workflows, the outbox's delivery and
the relay all read a queue from. Entries are kept per process and rebuilt when the
``LEDGER`` setting is replaced (``override_settings``) or the process forks, so a lookup
costs no settings parsing.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from .conf import get_ledger, ledger_settings
from .core.sharded import AnyLedger

__all__ = ["QUEUE_OPTION_KEYS", "QueueEntry", "Queues", "queues"]

#: ``LEDGER['QUEUES'][name]`` keys of task options (``MAX_ATTEMPTS`` and ``LEASE`` are
#: the ledger's own queue settings, read as task options too).
QUEUE_OPTION_KEYS: dict[str, str] = {
    "BACKOFF_BASE": "backoff_base",
    "BACKOFF_CAP": "backoff_cap",
    "RETRY_ON": "retry_on",
    "TIMEOUT": "timeout",
    "UNIQUE": "unique",
}


@dataclass(frozen=True)
class QueueEntry:
    """One queue: its ledger and its task options (lower-case names)."""

    ledger: AnyLedger
    max_attempts: int
    lease: float
    options: dict[str, Any]


class Queues:
    """The queues of the ``LEDGER`` setting, each built once per setting and process."""

    def __init__(self) -> None:
        self._entries: dict[str, tuple[object, int, QueueEntry]] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> QueueEntry:
        """Return queue ``name``; raise ``ImproperlyConfigured`` if LEDGER lacks it."""
        raw = ledger_settings.raw
        found = self._entries.get(name)
        if found is not None and found[0] is raw and found[1] == os.getpid():
            return found[2]
        with self._lock:
            config = ledger_settings.queue(name)
            overrides = ledger_settings.queues[name]
            entry = QueueEntry(
                ledger=get_ledger(name),
                max_attempts=config.max_attempts,
                lease=config.lease.total_seconds(),
                options={
                    option: overrides[key]
                    for key, option in QUEUE_OPTION_KEYS.items()
                    if overrides.get(key) is not None
                },
            )
            self._entries[name] = (raw, os.getpid(), entry)
        return entry

    def names(self) -> list[str]:
        return ledger_settings.queue_names

    def known(self, name: str) -> bool:
        try:
            return name in ledger_settings.queues
        except ImproperlyConfigured:
            return False


#: The process's queues, shared by every backend instance, handler and relay.
queues = Queues()
