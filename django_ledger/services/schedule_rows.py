"""Every schedule as the admin, the API and ``ledger_schedules`` list it: settings and stored.

A row says where the schedule comes from (``settings``: changed by a deploy only;
``stored``: changed at run time), its fields in the shape of ``LEDGER['SCHEDULES']``,
its version, whether it is paused or (a one-off) done, and, when it does not fire,
why.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.utils.translation import gettext

from ..conf import ledger_settings
from ..core.schedule import Snapshot, datetime_of
from ..schedules.config import ScheduleConfig
from .runtime_schedules import stored, typed
from .scheduler import schedules, state

__all__ = ["ScheduleRow", "entry_of", "row", "rows"]


@dataclass(frozen=True)
class ScheduleRow:
    """One schedule, as listed."""

    key: str
    source: str  # "settings" or "stored"
    entry: dict[str, Any]
    version: int | None
    paused: bool
    done: bool
    #: Why it does not fire, or "" when it does.
    why_not: str
    by: str = ""
    at_ms: int = 0

    @property
    def editable(self) -> bool:
        return self.source == "stored"


def entry_of(config: ScheduleConfig) -> dict[str, Any]:
    """A typed schedule in the shape of ``LEDGER['SCHEDULES'][key]`` (JSON values)."""
    entry: dict[str, Any] = {"TASK": config.task}
    if config.cron is not None:
        entry["CRON"] = config.cron
    elif config.at is not None:
        entry["AT"] = datetime_of(config.at).astimezone(config.timing.zone).isoformat()
    else:
        entry["EVERY"] = config.every
    entry.update(
        TIMEZONE=config.timezone,
        ARGS=list(config.args),
        KWARGS=dict(config.kwargs),
        QUEUE=config.queue,
        PRIORITY=config.priority,
        MISFIRE=str(config.misfire.value),
        GRACE=config.grace // timedelta(seconds=1),
        ENABLED=config.enabled,
    )
    return entry


def rows(snapshot: Snapshot | None = None) -> list[ScheduleRow]:
    """Every schedule: the settings' first, then the stored ones, each by key."""
    snapshot = state() if snapshot is None else snapshot
    settings = schedules(strict=False)
    found = [_settings_row(config, snapshot) for _, config in sorted(settings.items())]
    book = stored()
    runnable = typed(book)
    for key, definition in sorted(book.definitions.items()):
        why = ""
        if not ledger_settings.runtime_schedules:
            why = gettext("Run-time schedules are off (LEDGER['RUNTIME_SCHEDULES'] is False).")
        elif key in settings:
            why = gettext("LEDGER['SCHEDULES'] defines this name: the settings' schedule runs.")
        elif key not in runnable:
            why = gettext("It no longer passes the checks (see the scheduler's log).")
        config = runnable.get(key)
        found.append(
            ScheduleRow(
                key,
                "stored",
                dict(definition.entry),
                definition.version,
                key in snapshot.paused,
                _done(config, snapshot),
                why,
                definition.by,
                definition.at_ms,
            )
        )
    return found


def row(key: str) -> ScheduleRow:
    """The schedule ``key``; ``LookupError`` if none has that key."""
    # The settings' rows come first: a stored one of the same key is never the answer.
    for found in rows():
        if found.key == key:
            return found
    raise LookupError(gettext("There is no schedule %(key)r.") % {"key": key})


def _settings_row(config: ScheduleConfig, snapshot: Snapshot) -> ScheduleRow:
    return ScheduleRow(
        config.key,
        "settings",
        entry_of(config),
        None,
        config.key in snapshot.paused,
        _done(config, snapshot),
        "" if config.enabled else gettext("ENABLED is False."),
    )


def _done(config: ScheduleConfig | None, snapshot: Snapshot) -> bool:
    """A one-off schedule whose time has been decided (fired, or skipped while paused)."""
    if config is None or config.at is None:
        return False
    through = snapshot.through.get(config.key)
    return through is not None and through >= config.at and not snapshot.pending.get(config.key)
