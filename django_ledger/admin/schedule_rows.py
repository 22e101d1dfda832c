"""A schedule's rows in the admin: its state, its next fire in UTC and local time, its settings.

The schedules' list and detail pages (``schedules.py``) draw these; a row of a schedule
some scheduler node runs that this process's settings lack comes from what it published.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from django.utils.translation import gettext, pgettext

from ..conf import ledger_settings
from ..core.schedule import BadTiming, Cron, Every, Running, Snapshot, Timing, datetime_of, zone_of
from ..core.schedule.monitor import host_of
from ..schedules.config import ScheduleConfig
from .display import period_text

__all__ = [
    "is_active",
    "local_of",
    "local_text",
    "running_row",
    "settings_rows",
    "state_text",
    "unrun_row",
    "utc_of",
    "utc_text",
]


def running_row(key: str, entries: list[Running], state: Snapshot) -> dict[str, Any]:
    """A row for a schedule some node runs and these settings lack, from what it published."""
    entry = entries[0]
    now = state.now_ms // 1000
    try:
        zone = zone_of(entry.timezone)
        timing: Timing = (
            Cron(entry.cron, zone) if entry.cron is not None else Every(entry.every or 0, zone)
        )
    except BadTiming:
        words, following, zone = "-", entry.next_fire, zone_of("UTC")
    else:
        words, following = timing.describe(), timing.next_after(now)
    active = is_active(key, entry.enabled, state)
    return {
        "key": key,
        "url": None,
        "task": entry.task,
        "words": words,
        "state": state_text(key, entry.enabled, state),
        "active": active,
        "next_utc": utc_of(following if active else None),
        "next_local": local_of(following if active else None, zone),
        "nodes": sorted({e.node for e in entries}),
        "known": False,
    }


def unrun_row(key: str, entry: dict[str, Any]) -> dict[str, Any]:
    """A row for a stored schedule that does not run, and why."""
    why = (
        gettext("not run: run-time schedules are off (LEDGER['RUNTIME_SCHEDULES'] is False)")
        if not ledger_settings.runtime_schedules
        else gettext("not run: LEDGER['SCHEDULES'] has this name, or it fails the checks")
    )
    return {
        "key": key,
        "url": None,
        "task": entry.get("TASK", ""),
        "words": "-",
        "state": why,
        "active": False,
        "next_utc": "-",
        "next_local": "",
        "nodes": [],
        "known": True,
        "stored": True,
    }


def state_text(key: str, enabled: bool, state: Snapshot) -> str:
    if not enabled:
        return gettext("disabled (ENABLED is False)")
    pause = state.paused.get(key)
    if pause is not None:
        return gettext("paused by %(by)s") % {"by": pause.by or gettext("an operator")}
    return pgettext("schedule state", "active")


def is_active(key: str, enabled: bool, state: Snapshot) -> bool:
    """Whether the schedule fires: enabled and not paused (the list marks the others)."""
    return enabled and key not in state.paused


def utc_of(epoch: int | None) -> str:
    return "-" if epoch is None else utc_text(datetime_of(epoch))


def local_of(epoch: int | None, zone: ZoneInfo) -> str:
    if epoch is None:
        return "-"
    return local_text(datetime_of(epoch).astimezone(zone))


def utc_text(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def local_text(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S %Z (%z)")


def settings_rows(config: ScheduleConfig) -> list[tuple[str, str, str]]:
    """(label, setting key, value) of each setting, in words and JSON, not Python."""
    if config.cron is not None:
        when = (gettext("Cron expression"), "CRON", config.cron)
    elif config.at is not None:
        when = (gettext("Once, at"), "AT", local_of(config.at, config.timing.zone))
    else:
        every = Every(config.every or 1).describe().removeprefix("Every ")
        when = (gettext("Every"), "EVERY", every)
    rows = [
        (gettext("Task"), "TASK", config.task),
        when,
        (gettext("Time zone"), "TIMEZONE", config.timezone),
        (gettext("Queue"), "QUEUE", config.queue),
        (gettext("Priority"), "PRIORITY", str(config.priority)),
        (gettext("Arguments"), "ARGS", json.dumps(list(config.args), ensure_ascii=False)),
        (
            gettext("Keyword arguments"),
            "KWARGS",
            json.dumps(config.kwargs, ensure_ascii=False),
        ),
        (gettext("Misfire policy"), "MISFIRE", str(config.misfire)),
        (gettext("Grace of missed fires (for 'all')"), "GRACE", period_text(config.grace)),
        (gettext("Enabled"), "ENABLED", gettext("yes") if config.enabled else gettext("no")),
    ]
    monitor = config.monitor
    if monitor is not None:  # a ping URL holds its token: its host only
        said = (
            [gettext("Sentry monitor %(slug)s") % {"slug": monitor.sentry}]
            if monitor.sentry
            else []
        )
        if monitor.url is not None:
            said.insert(0, gettext("ping URL on %(host)s") % {"host": host_of(monitor.url)})
        rows.append((gettext("Monitor"), "MONITOR", "; ".join(said)))
    return rows
