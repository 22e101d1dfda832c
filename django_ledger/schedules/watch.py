"""The worker's hooks for a schedule's ``MONITOR``: a fire's task starts, and ends.

The worker calls ``task_started`` when a run starts and ``task_ended`` for each run
settled COMPLETED or FAILED. A run whose request id is a fire of a schedule with a
``MONITOR`` (``schedule:{key}:{epoch}``) gets its check-in queued: ``start`` for its
first attempt, ``ok`` or ``error`` at its end. Both go through this process's one sender
thread, in order, so a monitor never hears a run end before it starts (a start sent by
the scheduler, another process, could arrive after the worker's end of a quick task).
The schedule is typed in the sender thread, not in the worker's loop; a schedule stored
at run time (not in the settings) is also read there, from Redis.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ..conf import connection, ledger_settings
from ..core.schedule import Definitions, ScheduleStore
from ..core.schedule.monitor import fired_schedule
from .config import configured_schedules
from .monitoring import PINGER

__all__ = ["task_ended", "task_started"]


def task_started(queue: str, request_id: str, attempt: int) -> None:
    """The worker's hook, from the run's thread: queue the start of a fire's first attempt."""
    if attempt == 1:
        _queue(request_id, "start", "")


def task_ended(queue: str, request_id: str, completed: bool) -> None:
    """The worker's hook, from its loop: queue the end check-in of a fire's task."""
    if completed:
        _queue(request_id, "ok", "completed")
    else:
        _queue(request_id, "error", "failed")


def _queue(request_id: str, kind: str, note: str) -> None:
    """Cheap for any other task: its request id says it is no fire of a monitored schedule."""
    if not request_id.startswith("schedule:"):
        return
    raw = ledger_settings.schedules
    keys = fired_schedule(request_id)
    for key in keys:
        entry = raw.get(key) if isinstance(raw, dict) else None
        if isinstance(entry, dict):  # a settings schedule: its MONITOR, if any, is here
            if entry.get("MONITOR"):
                PINGER.put(partial(_check_in, key, entry, request_id, kind, note))
            return
    if ledger_settings.runtime_schedules:
        PINGER.put(partial(_stored_check_in, keys, request_id, kind, note))


def _stored_check_in(keys: tuple[str, ...], request_id: str, kind: str, note: str) -> None:
    """In the sender thread: the check-in of a fire of a schedule stored at run time."""
    found = Definitions(ScheduleStore(connection(), ledger_settings.namespace)).load()
    for key in keys:
        definition = found.definitions.get(key)
        if definition is not None:
            if definition.entry.get("MONITOR"):
                _check_in(key, definition.entry, request_id, kind, note)
            return


def _check_in(key: str, entry: dict[str, Any], request_id: str, kind: str, note: str) -> None:
    found = configured_schedules(
        {key: entry}, ledger_settings.queues, strict=False, defaults=ledger_settings.defaults
    )
    config = found.get(key)
    if config is not None and config.monitor is not None:
        PINGER.check_in(config.monitor, kind, request_id, note)
