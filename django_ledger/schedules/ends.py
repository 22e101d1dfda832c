"""The worker's hook for a schedule's ``MONITOR``: the end check-in of a fire's task.

The worker calls ``task_ended`` from its loop for each run settled COMPLETED or FAILED;
a run whose request id is a fire of a schedule with a ``MONITOR``
(``schedule:{key}:{epoch}``) gets its end check-in queued, and the schedule is typed in
the sender thread, not in the loop.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from ..conf import ledger_settings
from ..core.schedule.monitor import fired_schedule
from .config import configured_schedules
from .monitoring import PINGER

__all__ = ["task_ended"]


def task_ended(queue: str, request_id: str, completed: bool) -> None:
    """The worker's hook, from its loop: queue the end check-in of a fire's task.

    Cheap for any other task (its request id says it is no fire); the schedule is typed
    in the sender thread, not here.
    """
    if not request_id.startswith("schedule:"):
        return
    raw = ledger_settings.schedules
    if not isinstance(raw, dict):
        return
    for key in fired_schedule(request_id):
        entry = raw.get(key)
        if isinstance(entry, dict) and entry.get("MONITOR"):
            PINGER.put(partial(_ended, key, entry, request_id, completed))
            return


def _ended(key: str, entry: dict[str, Any], request_id: str, completed: bool) -> None:
    found = configured_schedules(
        {key: entry}, ledger_settings.queues, strict=False, defaults=ledger_settings.defaults
    )
    config = found.get(key)
    if config is not None and config.monitor is not None:
        kind, note = ("ok", "completed") if completed else ("error", "failed")
        PINGER.check_in(config.monitor, kind, request_id, note)
