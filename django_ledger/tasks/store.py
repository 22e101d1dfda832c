"""The task backend's view of the ledger: one ``Ledger`` per queue, and reads of tasks.

Ledgers are kept per process and rebuilt when the ``LEDGER`` setting is replaced
(``override_settings``) or the process forks, so an enqueue costs no settings parsing.
``read_tasks`` reads records with their result documents in one round trip.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from ..conf import get_ledger, ledger_settings
from ..core.records import decode_record
from ..core.sharded import AnyLedger
from .options import QUEUE_OPTION_KEYS
from .state import TaskState, task_state

__all__ = ["QueueEntry", "Queues", "queues", "read_tasks"]


@dataclass(frozen=True)
class QueueEntry:
    """One queue as tasks use it: its ledger and its task options (lower-case names)."""

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


#: The process's queues, shared by every backend instance and handler.
queues = Queues()


def read_tasks(ledgers: Sequence[AnyLedger], request_ids: Iterable[str]) -> list[TaskState | None]:
    """Return each id's task from the first of ``ledgers`` that holds it, in one round trip.

    On one Redis the reads are one transaction (MULTI), so a record and its result
    document are always of the same moment; on a cluster they are not, and a settlement
    between the two reads may show a result one attempt ahead of its record.
    """
    ids = list(request_ids)
    if not ledgers or not ids:
        return [None] * len(ids)
    client = ledgers[0].redis
    cluster = type(client).__name__ == "RedisCluster"
    with ledgers[0].translate_errors():
        pipe = client.pipeline(transaction=not cluster)
        for request_id in ids:
            for ledger in ledgers:
                shard = ledger.shard_for(request_id)  # a sharded queue: the id's shard
                pipe.hget(shard.records_key, request_id)
                pipe.hget(shard.results_key, request_id)
        replies = pipe.execute()
    found: list[TaskState | None] = []
    width = 2 * len(ledgers)
    for position, request_id in enumerate(ids):
        row = replies[position * width : (position + 1) * width]
        state = None
        for index, ledger in enumerate(ledgers):
            raw = row[2 * index]
            if raw is not None:
                state = task_state(ledger.queue, decode_record(request_id, raw), row[2 * index + 1])
                break
        found.append(state)
    return found
