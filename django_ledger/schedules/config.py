"""``LEDGER['SCHEDULES']``: each schedule's settings, checked and typed.

The system checks (``django_ledger.checks.schedules``) and the scheduler read the
setting through ``problems`` and ``schedule_of`` here, so they agree: the checks report
every problem with its id; the scheduler refuses to start on the first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext

from ..core.schedule import At, BadTiming, Cron, Every, Misfire, Schedule, Timing, zone_of
from ..core.schedule.monitor import Monitor
from ..defaults import LIMITS, SCHEDULE_DEFAULTS, SCHEDULE_KEYS, Limit, usable_name
from .fit import fit_problems, imported
from .monitoring import monitor_of, monitor_problems
from .problem import Problem
from .problem import where as _where

__all__ = [
    "PRIORITY_RANGE",
    "SCHEDULE_FIELDS",
    "Problem",
    "ScheduleConfig",
    "configured_schedules",
    "problems",
    "schedule_of",
    "usable_name",
]

#: Priorities a schedule's fires may carry, as the task framework allows.
PRIORITY_RANGE = range(-100, 101)
#: The fields of one schedule (run-time schedules store the same ones).
SCHEDULE_FIELDS = tuple(sorted(SCHEDULE_KEYS))
_GRACE = Limit("duration", 0, LIMITS["RETENTION"].high, low_inclusive=False)


@dataclass(frozen=True)
class ScheduleConfig:
    """One schedule, defaults filled in and every value checked."""

    key: str
    task: str
    timing: Timing
    cron: str | None
    every: int | None
    timezone: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    queue: str
    priority: int
    misfire: Misfire
    grace: timedelta
    enabled: bool
    #: Where its fires check in (``MONITOR``), if anywhere.
    monitor: Monitor | None = None
    #: A one-off schedule's instant (epoch seconds), ``None`` for a recurring one.
    at: int | None = None

    @property
    def schedule(self) -> Schedule:
        """The core's view of this schedule, for the ticker."""
        return Schedule(
            key=self.key,
            timing=self.timing,
            misfire=self.misfire,
            grace_ms=self.grace // timedelta(milliseconds=1),
            enabled=self.enabled,
        )


def configured_schedules(
    raw: Any,
    queues: dict[str, Any],
    *,
    strict: bool = True,
    defaults: dict[str, Any] | None = None,
) -> dict[str, ScheduleConfig]:
    """Type every schedule of ``raw`` (``LEDGER['SCHEDULES']``).

    With ``strict``, the first problem raises ``ImproperlyConfigured``; without it, a
    schedule with problems is left out. ``defaults`` is ``LEDGER['DEFAULTS']`` over the
    built-in defaults (for the queues' payload limit).
    """
    found = problems(raw, queues, defaults)
    if found and strict:
        first = found[0]
        raise ImproperlyConfigured(
            f"{first.where}: {first.message} (django_ledger.E{first.id:03d}; {first.hint})"
        )
    schedules: dict[str, ScheduleConfig] = {}
    if not isinstance(raw, dict):
        return schedules
    for key, entry in raw.items():
        if not usable_name(key) or any(p.where.startswith(_where(key)) for p in found):
            continue
        schedules[key] = schedule_of(key, entry, queues)
    return schedules


def schedule_of(key: str, entry: dict[str, Any], queues: dict[str, Any]) -> ScheduleConfig:
    """Type one schedule that ``problems`` passed."""
    config = {**SCHEDULE_DEFAULTS, **entry}
    zone = zone_of(config["TIMEZONE"])
    cron, every = config.get("CRON"), config.get("EVERY")
    timing: Timing
    seconds = at = None
    if isinstance(cron, str):
        timing = Cron(cron, zone)
    elif config.get("AT") is not None:
        timing = At.of(config["AT"], zone)
        at = timing.epoch
    else:
        assert every is not None  # ``problems`` holds one of them to be set
        timing = Every.of(every, zone)
        seconds = timing.seconds
    grace = config["GRACE"]
    return ScheduleConfig(
        key=key,
        task=config["TASK"],
        timing=timing,
        cron=cron,
        every=seconds,
        timezone=config["TIMEZONE"],
        args=tuple(config["ARGS"]),
        kwargs=dict(config["KWARGS"]),
        queue=_queue_of(config),
        priority=config["PRIORITY"],
        misfire=Misfire(config["MISFIRE"]),
        grace=grace if isinstance(grace, timedelta) else timedelta(seconds=grace),
        enabled=config["ENABLED"],
        monitor=monitor_of(config["MONITOR"], timing, cron),
        at=at,
    )


def problems(
    raw: Any, queues: dict[str, Any], defaults: dict[str, Any] | None = None
) -> list[Problem]:
    """Return everything wrong with ``LEDGER['SCHEDULES']``, each with its check id.

    A check reports, it never raises: a task module that raises at import is a problem
    of its schedule (E073), as is one that cannot be imported.
    """
    where = "LEDGER['SCHEDULES']"
    if raw is None:
        return []
    if not isinstance(raw, dict):
        return [
            Problem(
                70,
                gettext("Must be a dict of schedule key -> settings, not %(type)s.")
                % {"type": type(raw).__name__},
                gettext(
                    "For example: 'SCHEDULES': {'nightly': {'TASK': 'reports.tasks.nightly', "
                    "'CRON': '0 3 * * *'}}."
                ),
                where,
            )
        ]
    found: list[Problem] = []
    for key, entry in raw.items():
        if not usable_name(key):
            found.append(
                Problem(
                    71,
                    gettext("Schedule key %(key)r cannot name a schedule.") % {"key": key},
                    gettext(
                        "Use 1 to 100 characters without whitespace, braces or control characters: it "
                        "is part of request ids and Redis keys."
                    ),
                    where,
                )
            )
            continue
        found += _entry_problems(key, entry, queues, defaults)
    return found


def _entry_problems(
    key: str, entry: Any, queues: dict[str, Any], defaults: dict[str, Any] | None
) -> list[Problem]:
    if not isinstance(entry, dict):
        return [
            Problem(
                70,
                gettext("Must be a dict of settings, not %(type)s.")
                % {"type": type(entry).__name__},
                gettext("Give at least TASK and one of CRON or EVERY."),
                _where(key),
            )
        ]
    found = [
        Problem(
            72,
            gettext("Unknown key %(name)r.") % {"name": name},
            gettext("Known keys: %(names)s (keys are upper case).")
            % {"names": ", ".join(sorted(SCHEDULE_KEYS))},
            _where(key),
        )
        for name in entry
        if name not in SCHEDULE_KEYS
    ]
    config = {**SCHEDULE_DEFAULTS, **entry}
    found += _task_problems(key, config)
    found += _timing_problems(key, config)
    found += _queue_problems(key, config, queues)
    found += _option_problems(key, config)
    found += monitor_problems(key, config["MONITOR"])
    if found:
        return found
    queue = _queue_of(config)
    overrides = queues[queue]
    return fit_problems(
        key, config, queue, overrides if isinstance(overrides, dict) else {}, defaults
    )


def _task_problems(key: str, config: dict[str, Any]) -> list[Problem]:
    path, where = config.get("TASK"), _where(key, "TASK")
    hint = gettext(
        "Give the dotted path of a task (a function decorated with @task), e.g. "
        "'reports.tasks.nightly'."
    )
    if path is None:
        return [Problem(73, gettext("A schedule needs TASK."), hint, _where(key))]
    if not isinstance(path, str) or "." not in path:
        return [
            Problem(
                73, gettext("Must be a dotted path, got %(path)r.") % {"path": path}, hint, where
            )
        ]
    _, why = imported(path)
    if why is not None:
        return [
            Problem(
                73,
                gettext("%(path)r does not import: %(why)s.") % {"path": path, "why": why},
                hint,
                where,
            )
        ]
    return []


def _timing_problems(key: str, config: dict[str, Any]) -> list[Problem]:
    cron, every, at = config.get("CRON"), config.get("EVERY"), config.get("AT")
    found: list[Problem] = []
    given = sum(value is not None for value in (cron, every, at))
    if given != 1:
        found.append(
            Problem(
                74,
                gettext("Give exactly one of CRON, EVERY and AT, not several.")
                if given
                else gettext("Give exactly one of CRON, EVERY and AT; it has none."),
                gettext(
                    "CRON: a cron expression such as '0 3 * * *'; EVERY: a timedelta such as "
                    "timedelta(minutes=5); AT: the one time a one-off schedule fires."
                ),
                _where(key),
            )
        )
    try:
        zone = zone_of(config["TIMEZONE"])
    except BadTiming as exc:
        found.append(
            Problem(
                77,
                f"{exc}.",
                gettext(
                    "Give an IANA time zone name such as 'Europe/Paris' or 'UTC' (the default); on "
                    "a system without tz data, install the tzdata package."
                ),
                _where(key, "TIMEZONE"),
            )
        )
        zone = zone_of("UTC")
    if cron is not None:
        try:
            Cron(cron, zone)
        except BadTiming as exc:
            found.append(
                Problem(
                    75,
                    f"{exc}.",
                    gettext(
                        "Five fields (minute hour day-of-month month day-of-week), six with seconds "
                        "first, or @hourly, @daily, @weekly, @monthly, @yearly."
                    ),
                    _where(key, "CRON"),
                )
            )
    if every is not None:
        try:
            Every.of(every, zone)
        except BadTiming as exc:
            found.append(
                Problem(
                    76,
                    f"{exc}.",
                    gettext(
                        "Give a timedelta of whole seconds, at least one, e.g. timedelta(minutes=5)."
                    ),
                    _where(key, "EVERY"),
                )
            )
    if at is not None:
        try:
            At.of(at, zone)
        except (BadTiming, OverflowError) as exc:
            found.append(
                Problem(
                    94,
                    f"{exc}.",
                    gettext(
                        "Give a datetime, or an ISO 8601 text such as '2030-01-31T09:00:00' "
                        "(read in TIMEZONE unless it gives an offset)."
                    ),
                    _where(key, "AT"),
                )
            )
    return found


def _queue_of(config: dict[str, Any]) -> str:
    queue = config["QUEUE"]
    if queue is not None:
        return str(queue)
    path = config.get("TASK")
    task = imported(path)[0] if isinstance(path, str) and "." in path else None
    name = getattr(task, "queue_name", None)
    return name if isinstance(name, str) else "default"


def _queue_problems(key: str, config: dict[str, Any], queues: dict[str, Any]) -> list[Problem]:
    queue = config["QUEUE"]
    if queue is not None and not isinstance(queue, str):
        name: Any = queue
    else:
        try:
            name = _queue_of(config)
        except (TypeError, ValueError):
            return []  # the task's own problem is reported already
    if isinstance(name, str) and name in queues:
        return []
    known = ", ".join(map(repr, queues)) or "none"
    if queue is not None:
        message = gettext(
            "QUEUE %(name)r is not a queue of LEDGER['QUEUES'] (it configures %(known)s)."
        )
    else:
        message = gettext(
            "the task's queue_name %(name)r is not a queue of LEDGER['QUEUES'] (it "
            "configures %(known)s)."
        )
    return [
        Problem(
            78,
            (message % {"name": name, "known": known}),
            gettext("Name a configured queue in QUEUE, or add the queue to LEDGER['QUEUES']."),
            _where(key, "QUEUE"),
        )
    ]


def _option_problems(key: str, config: dict[str, Any]) -> list[Problem]:
    found: list[Problem] = []

    def bad(name: str, message: str, hint: str) -> None:
        found.append(Problem(79, f"{name} {message}.", hint, _where(key, name)))

    args, kwargs = config["ARGS"], config["KWARGS"]
    json_only = (
        gettext("must hold JSON values only"),
        gettext("Give str, int, float, bool, None, lists and dicts."),
    )
    if not isinstance(args, list | tuple):
        bad(
            "ARGS",
            gettext("must be a list, got %(args)r") % {"args": args},
            gettext("Give the task's positional arguments as a list."),
        )
    elif not _json_ok(list(args)):
        bad("ARGS", *json_only)
    if not isinstance(kwargs, dict) or not all(isinstance(name, str) for name in kwargs):
        bad(
            "KWARGS",
            gettext("must be a dict with str keys, got %(kwargs)r") % {"kwargs": kwargs},
            gettext("Give the task's keyword arguments."),
        )
    elif not _json_ok(kwargs):
        bad("KWARGS", *json_only)
    priority = config["PRIORITY"]
    if (
        isinstance(priority, bool)
        or not isinstance(priority, int)
        or priority not in PRIORITY_RANGE
    ):
        bad(
            "PRIORITY",
            gettext("must be an int from -100 to 100, got %(priority)r") % {"priority": priority},
            gettext("0 is the default; higher runs first."),
        )
    misfire = config["MISFIRE"]
    if misfire not in {policy.value for policy in Misfire}:
        bad(
            "MISFIRE",
            gettext("must be 'latest', 'all' or 'skip', got %(misfire)r") % {"misfire": misfire},
            gettext("'latest' (the default) runs the newest missed fire once."),
        )
    problem = _GRACE.problem(config["GRACE"])
    if problem is not None:
        bad("GRACE", problem, gettext("Give a timedelta, e.g. timedelta(hours=1) (the default)."))
    if not isinstance(config["ENABLED"], bool):
        bad(
            "ENABLED",
            gettext("must be True or False, got %(enabled)r") % {"enabled": config["ENABLED"]},
            gettext("True is the default."),
        )
    return found


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True
