"""A schedule's ``MONITOR``: checked, typed, and told of each fire and of its task's end.

``MONITOR`` is ``{"URL": "https://hc-ping.com/<uuid>"}`` (a ping URL, healthchecks.io
style), ``{"SENTRY": "<monitor-slug>"}`` (Sentry Crons, through ``sentry_sdk``), or both
keys. ``fired`` queues an error check-in when the ledger rejects a fire; the worker's
hooks (``watch``) queue the start and the end of a fire's task. The check-ins go out
from the process's sender thread (``core.schedule.monitor.Pinger``), never from the tick
or the worker's loop.
"""

from __future__ import annotations

import re
import urllib.parse
from importlib import import_module
from typing import Any, Final

from django.utils.translation import gettext

from ..core.results import AdmissionStatus
from ..core.schedule import Fire, Timing
from ..core.schedule.monitor import Monitor, Pinger, sentry_config
from .problem import Problem
from .problem import where as _where

__all__ = [
    "MAX_URL_CHARS",
    "MONITOR_KEYS",
    "PINGER",
    "fired",
    "monitor_of",
    "monitor_problems",
    "sentry_installed",
]

#: ``MONITOR``'s keys.
MONITOR_KEYS: Final = ("URL", "SENTRY")
#: The longest ping URL taken.
MAX_URL_CHARS: Final = 2000
#: This process's sender of check-ins.
PINGER: Final = Pinger()
# Sentry's monitor slugs: lower-case letters, digits, hyphens and underscores.
_SLUG: Final = re.compile(r"[a-z0-9_-]{1,50}\Z")


def monitor_problems(key: str, value: Any) -> list[Problem]:
    """Everything wrong with schedule ``key``'s ``MONITOR`` (E098; E099: no sentry_sdk)."""
    if value is None:
        return []
    where = _where(key, "MONITOR")
    hint = gettext(
        "For example {'URL': 'https://hc-ping.com/<uuid>'} or {'SENTRY': 'nightly-report'} "
        "(or both keys)."
    )
    if not isinstance(value, dict) or not value:
        return [
            Problem(
                98,
                gettext("MONITOR must be a dict with URL, SENTRY or both, got %(value)s.")
                % {"value": _short(value)},
                hint,
                where,
            )
        ]
    found = [
        Problem(
            98,
            gettext("MONITOR has an unknown key %(name)s.") % {"name": _short(name)},
            hint,
            where,
        )
        for name in value
        if name not in MONITOR_KEYS
    ]
    if "URL" in value and not _url_ok(value["URL"]):
        found.append(
            Problem(
                98,  # the URL holds its token: the message does not repeat it
                gettext(
                    "MONITOR['URL'] must be an http or https URL with a host, no query or "
                    "fragment, no spaces, of at most 2,000 characters."
                ),
                gettext(
                    "Give the check's ping URL, such as 'https://hc-ping.com/<uuid>': '/start' "
                    "and '/fail' are added to it."
                ),
                where,
            )
        )
    if "SENTRY" in value:
        slug = value["SENTRY"]
        if not isinstance(slug, str) or not _SLUG.match(slug):
            found.append(
                Problem(
                    98,
                    gettext("MONITOR['SENTRY'] must be a monitor slug, got %(slug)s.")
                    % {"slug": _short(slug)},
                    gettext(
                        "1 to 50 lower-case letters, digits, hyphens and underscores, as a "
                        "Sentry Crons monitor's slug."
                    ),
                    where,
                )
            )
        elif not sentry_installed():
            found.append(
                Problem(
                    99,
                    gettext("MONITOR['SENTRY'] needs sentry_sdk, which is not installed."),
                    gettext(
                        "Install it (pip install 'django-task-ledger[sentry]') and call "
                        "sentry_sdk.init() in your settings, or drop SENTRY."
                    ),
                    where,
                )
            )
    return found


def monitor_of(value: Any, timing: Timing, cron: str | None) -> Monitor | None:
    """Type a ``MONITOR`` that ``monitor_problems`` passed."""
    if not value:
        return None
    slug = value.get("SENTRY")
    return Monitor(
        url=value.get("URL"),
        sentry=slug,
        sentry_config=sentry_config(timing, cron) if slug is not None else None,
    )


def sentry_installed() -> bool:
    """Whether ``sentry_sdk`` (with its Crons API) imports."""
    try:
        import_module("sentry_sdk.crons")
    except ImportError:
        return False
    return True


def fired(fire: Fire, monitor: Monitor | None, status: AdmissionStatus) -> None:
    """Queue the error check-in of a fire the ledger rejected: no task will run for it.

    An admitted fire's start is told by the worker that runs it (``watch``).
    """
    if monitor is not None and status is AdmissionStatus.REJECTED:
        PINGER.check_in(monitor, "error", fire.request_id, "rejected")


def _url_ok(url: Any) -> bool:
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        return False
    if any(char.isspace() or not char.isprintable() for char in url):
        return False
    try:
        parts = urllib.parse.urlsplit(url)
        host, _ = parts.hostname, parts.port
    except ValueError:
        return False
    return (
        parts.scheme in ("http", "https") and bool(host) and not parts.query and not parts.fragment
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."
