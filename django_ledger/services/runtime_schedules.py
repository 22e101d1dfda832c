"""Schedules stored at run time: validated as the settings are, saved compare-and-set.

The admin, the API and ``manage.py ledger_schedules`` call these. A schedule is saved
only if ``django_ledger.schedules.config.problems`` (the function the system checks run
over ``LEDGER['SCHEDULES']``) finds nothing wrong with it; its errors come back by
field (``ScheduleInvalid.errors``). Settings stay the code-reviewed source: a key of
``LEDGER['SCHEDULES']`` cannot be stored, and ``LEDGER['RUNTIME_SCHEDULES'] = False``
turns stored schedules off (they neither fire nor change). ``docs/scheduler.md``,
"Schedules at run time", explains the model.
"""

from __future__ import annotations

import logging
import re
import sys
from dataclasses import replace
from datetime import datetime
from typing import Any, Final

from django.apps import apps
from django.utils.translation import gettext

from ..conf import ledger_settings
from ..core.schedule import Definition, Definitions, Pending, VersionConflict, datetime_of, decide
from ..schedules.config import SCHEDULE_FIELDS, ScheduleConfig, problems, schedule_of, usable_name
from ..schedules.problem import where
from .schedule_sources import definitions, schedules, store, stored, typed

__all__ = [
    "FIELDS",
    "RuntimeSchedulesOff",
    "ScheduleInvalid",
    "VersionConflict",
    "create",
    "definitions",
    "delete",
    "edit",
    "every_schedule",
    "queue_of",
    "stored",
    "typed",
    "validate",
]

logger = logging.getLogger("django_ledger.scheduler")

#: The fields a stored schedule may hold: those of ``LEDGER['SCHEDULES'][key]``.
FIELDS: Final = SCHEDULE_FIELDS
#: Attempts of an edit against schedulers that decide between its reading and its write.
_ATTEMPTS: Final = 20
#: Who a fire the edit decided for the old timing is pending for: any node takes it over.
EDITOR_NODE: Final = "editor"
_PATH: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")


class ScheduleInvalid(ValueError):
    """A schedule refused at save: its errors by field (``KEY`` for its name)."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        self.errors = errors
        super().__init__("; ".join(f"{name}: {' '.join(words)}" for name, words in errors.items()))


class RuntimeSchedulesOff(PermissionError):
    """``LEDGER['RUNTIME_SCHEDULES']`` is False: stored schedules neither fire nor change."""

    def __init__(self) -> None:
        super().__init__(
            gettext(
                "Run-time schedules are off (LEDGER['RUNTIME_SCHEDULES'] is False): stored "
                "schedules do not fire and cannot be changed."
            )
        )


def validate(key: str, entry: dict[str, Any], *, now: int | None = None) -> None:
    """Raise ``ScheduleInvalid`` unless ``entry`` may be stored as schedule ``key``."""
    errors: dict[str, list[str]] = {}
    if not isinstance(key, str) or not usable_name(key):
        errors["KEY"] = [
            gettext("Use 1 to 100 characters without whitespace, braces or control characters.")
        ]
    elif key in schedules(strict=False) or key in (ledger_settings.schedules or {}):
        errors["KEY"] = [
            gettext(
                "LEDGER['SCHEDULES'] defines %(key)r: a schedule of the settings is changed by "
                "a deploy, and its name cannot be stored."
            )
            % {"key": key}
        ]
    path = entry.get("TASK")
    if isinstance(path, str) and not _reachable(path):
        errors["TASK"] = [
            gettext(
                "%(path)r is not in an installed app's package, nor already imported: a "
                "schedule stored at run time names a task the project declares."
            )
            % {"path": path}
        ]
    if errors:
        raise ScheduleInvalid(errors)
    for problem in _problems(key, entry):
        # The field the problem's place names (``__all__``: the schedule as a whole).
        name = next((name for name in FIELDS if problem.where == where(key, name)), "__all__")
        errors.setdefault(name, []).append(f"{problem.message} {problem.hint}".strip())
    if not errors and entry.get("AT") is not None:
        config = schedule_of(key, entry, ledger_settings.queues)
        now = store().server_time_ms() // 1000 if now is None else now
        if config.at is not None and config.at <= now:
            errors["AT"] = [
                gettext("%(at)s has passed: a one-off schedule fires at a time to come.")
                % {"at": datetime_of(config.at).isoformat()}
            ]
    if errors:
        raise ScheduleInvalid(errors)


def create(key: str, entry: dict[str, Any], by: str) -> Definition:
    """Store a new schedule ``key``: its fires start after now, on every node."""
    _runtime_on(key)
    entry = _clean(entry)
    now_ms = store().server_time_ms()
    validate(key, entry, now=now_ms // 1000)
    definition = Definition(key, 0, entry, by, now_ms)
    _, version = definitions().put(
        definition, None, through=(None, now_ms // 1000), check_through=False
    )
    logger.info("schedule %r created by %s: %s", key, by, _shown(entry))
    return replace(definition, version=version)


def edit(key: str, entry: dict[str, Any], by: str, version: int | None = None) -> Definition:
    """Replace stored schedule ``key`` (at ``version``, if given) with ``entry``.

    The old timing's fires due up to now are decided in the same call (pending, for any
    node to admit), and the new timing fires from the first fire after now: an edit
    neither fires a schedule twice nor skips a fire it owed.
    """
    book, old = _stored_one(key)
    entry = _clean(entry)
    expected = old.version if version is None else version
    if expected != old.version:
        raise VersionConflict(key, expected, old.version)
    validate(key, entry)
    old_config = (
        None if _problems(key, old.entry) else schedule_of(key, old.entry, ledger_settings.queues)
    )
    for _ in range(_ATTEMPTS):
        snapshot = store().snapshot()
        now = snapshot.now_ms // 1000
        through = snapshot.through.get(key)
        owed: tuple[int, ...] = ()
        if through is not None and old_config is not None:
            schedule = old_config.schedule
            decision = decide(
                schedule.timing, through, snapshot.now_ms, schedule.misfire, schedule.grace_ms
            )
            if schedule.enabled and key not in snapshot.paused:
                owed = decision.fires
        definition = Definition(key, 0, entry, by, snapshot.now_ms)
        status, new_version = book.put(
            definition,
            expected,
            through=(through, max(now, through or now)),
            owed=owed,
            pending=Pending(EDITOR_NODE, snapshot.now_ms),
        )
        if status == "ok":
            logger.info(
                "schedule %r edited by %s (version %s): %s%s",
                key,
                by,
                new_version,
                _shown(entry),
                f"; fires owed before the change: {list(owed)}" if owed else "",
            )
            return replace(definition, version=new_version)
    raise VersionConflict(key, expected, expected)  # schedulers kept deciding: try again


def delete(key: str, by: str, version: int | None = None) -> None:
    """Delete stored schedule ``key`` (at ``version``, if given), its pause and pending fires."""
    book, old = _stored_one(key)
    book.delete(key, old.version if version is None else version)
    logger.info("schedule %r deleted by %s (was %s)", key, by, _shown(old.entry))


def _stored_one(key: str) -> tuple[Definitions, Definition]:
    """The stored schedules and schedule ``key`` of them, to change (``LookupError``)."""
    _runtime_on(key)
    book = definitions()
    old = book.get(key)
    if old is None:
        raise LookupError(gettext("There is no stored schedule %(key)r.") % {"key": key})
    return book, old


def _reachable(path: str) -> bool:
    """Whether ``path`` may be looked up without importing a module the project does not
    install: a path typed in a form or sent to the API never imports anything else."""
    if not _PATH.fullmatch(path):
        return True  # the checks' own rule (E073) says what is wrong with it
    module = path.rpartition(".")[0]
    return module in sys.modules or apps.get_containing_app_config(module) is not None


def _runtime_on(key: str) -> None:
    if not ledger_settings.runtime_schedules:
        raise RuntimeSchedulesOff()
    if key in schedules(strict=False):
        raise ScheduleInvalid(
            {
                "KEY": [
                    gettext(
                        "LEDGER['SCHEDULES'] defines %(key)r: it changes by a deploy, not at run "
                        "time (its pause still works)."
                    )
                    % {"key": key}
                ]
            }
        )


def _problems(key: str, entry: dict[str, Any]) -> list[Any]:
    return problems({key: entry}, ledger_settings.queues, ledger_settings.defaults)


def _clean(entry: dict[str, Any]) -> dict[str, Any]:
    """Drop absent values (the defaults apply); a datetime ``AT`` as ISO 8601 text."""
    cleaned = {name: value for name, value in entry.items() if value is not None}
    at = cleaned.get("AT")
    if isinstance(at, datetime):
        cleaned["AT"] = at.isoformat()
    if isinstance(cleaned.get("ARGS"), tuple):
        cleaned["ARGS"] = list(cleaned["ARGS"])
    return cleaned


def _shown(entry: dict[str, Any]) -> str:
    text = ", ".join(f"{name}={entry[name]!r}" for name in sorted(entry))
    return text if len(text) <= 500 else text[:500] + "..."


def every_schedule() -> dict[str, ScheduleConfig]:
    """Every schedule that runs: the stored ones, and the settings' (which win a name)."""
    return {**typed(stored()), **schedules(strict=False)}


def queue_of(key: str, entry: dict[str, Any]) -> str | None:
    """The queue a valid ``entry``'s fires go to (``None`` if it is not valid)."""
    entry = _clean(entry)
    try:
        validate(key, entry)
    except ScheduleInvalid:
        return None
    return schedule_of(key, entry, ledger_settings.queues).queue
