"""Checks of the ``LEDGER`` setting: its shape, names, connections, limits and backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext

from .. import defaults as setting
from .base import error as _error
from .base import imported
from .connection import check_connection

__all__ = ["check_settings"]


def check_settings(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Check the shape, names, connections, backend and limits of ``LEDGER``."""
    raw = getattr(settings, "LEDGER", {})
    if not isinstance(raw, dict):
        return [
            _error(
                1,
                gettext("LEDGER must be a dict, not %(type)s.") % {"type": type(raw).__name__},
                gettext(
                    "Write LEDGER = {...} (see 'Settings' in the django-ledger docs), or remove it "
                    "to use the defaults."
                ),
                "LEDGER",
            )
        ]
    errors: list[checks.CheckMessage] = []
    errors += _unknown_keys(raw, setting.TOP_KEYS, "LEDGER")
    if "NAMESPACE" in raw and not setting.usable_name(raw["NAMESPACE"]):
        errors.append(_bad_namespace(raw["NAMESPACE"], "LEDGER['NAMESPACE']"))
    errors += check_connection(
        raw.get("CONNECTION", setting.TOP_DEFAULTS["CONNECTION"]), "LEDGER['CONNECTION']"
    )
    if not isinstance(raw.get("COUNTERS", True), bool):
        errors.append(
            _error(
                7,
                gettext("Must be True or False, not %(counters)r.") % {"counters": raw["COUNTERS"]},
                gettext("COUNTERS turns the workers' counters (the admin's charts) on or off."),
                "LEDGER['COUNTERS']",
            )
        )
    if not isinstance(raw.get("RUNTIME_SCHEDULES", True), bool):
        errors.append(
            _error(
                8,
                gettext("Must be True or False, not %(value)r.")
                % {"value": raw["RUNTIME_SCHEDULES"]},
                gettext("RUNTIME_SCHEDULES turns schedules stored at run time on or off."),
                "LEDGER['RUNTIME_SCHEDULES']",
            )
        )
    timeouts = _section(raw, "TIMEOUTS", errors)
    if timeouts is not None:
        limits = dict.fromkeys(setting.TIMEOUT_KEYS, setting.TIMEOUT_LIMIT)
        errors += _check_ranges(timeouts, "TIMEOUTS", limits, _bad_timeout)
    durability = _section(raw, "DURABILITY", errors)
    if durability is not None:
        limits = setting.DURABILITY_LIMITS
        errors += _check_ranges(durability, "DURABILITY", limits, _bad_durability)
    defaults = _section(raw, "DEFAULTS", errors)
    if defaults is not None:
        errors += _unknown_keys(defaults, frozenset(setting.DEFAULTS), "LEDGER['DEFAULTS']")
        errors += _check_limits(defaults, "LEDGER['DEFAULTS']")
    errors += _check_queues(raw.get("QUEUES", setting.TOP_DEFAULTS["QUEUES"]), defaults or {})
    _section(raw, "API", errors)  # its keys are the REST API's to check
    dispatch = _section(raw, "DISPATCH", errors)
    if dispatch is not None:
        errors += _check_dispatch(dispatch)
    return errors


def _section(
    raw: dict[str, Any], name: str, errors: list[checks.CheckMessage]
) -> dict[str, Any] | None:
    value = raw.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.append(
            _error(
                3,
                gettext("Must be a dict, not %(type)s.") % {"type": type(value).__name__},
                gettext(
                    "Give LEDGER[%(name)r] as a dict of settings, or leave it out for the defaults."
                )
                % {"name": name},
                f"LEDGER[{name!r}]",
            )
        )
        return None
    return value


def _unknown_keys(
    section: dict[Any, Any], known: frozenset[str], where: str
) -> Iterator[checks.CheckMessage]:
    for key in section:
        if key not in known:
            yield _error(
                2,
                gettext("Unknown key %(key)r.") % {"key": key},
                gettext("Known keys: %(names)s (keys are upper case).")
                % {"names": ", ".join(sorted(known))},
                where,
            )


def _bad_namespace(value: Any, where: str) -> checks.Error:
    return _error(
        5,
        gettext("%(value)r cannot be part of a Redis key name.") % {"value": value},
        gettext("Use 1 to 100 characters without whitespace, braces or control characters."),
        where,
    )


def _check_queues(queues: Any, defaults: dict[str, Any]) -> list[checks.CheckMessage]:
    if not isinstance(queues, dict) or not queues:
        return [
            _error(
                3,
                gettext("Must be a non-empty dict of queue name -> settings, got %(queues)r.")
                % {"queues": queues},
                gettext("For example: 'QUEUES': {'default': {}, 'emails': {'MAX_ATTEMPTS': 5}}."),
                "LEDGER['QUEUES']",
            )
        ]
    errors: list[checks.CheckMessage] = []
    for name, overrides in queues.items():
        where = f"LEDGER['QUEUES'][{name!r}]"
        if not setting.usable_name(name):
            errors.append(
                _error(
                    4,
                    gettext("Queue name %(name)r cannot be part of a Redis key name.")
                    % {"name": name},
                    gettext(
                        "Use 1 to 100 characters without whitespace, braces or control characters."
                    ),
                    "LEDGER['QUEUES']",
                )
            )
        if overrides is None:
            continue
        if not isinstance(overrides, dict):
            errors.append(
                _error(
                    3,
                    gettext("Must be a dict of overrides, not %(type)s.")
                    % {"type": type(overrides).__name__},
                    gettext("Give {} for a queue that takes every default."),
                    where,
                )
            )
            continue
        errors += _unknown_keys(overrides, setting.QUEUE_KEYS, where)
        errors += _check_limits(overrides, where)
        errors += _check_flow_limits(overrides, str(name), where)
        errors += _check_fused_only(overrides, defaults, where)
        if "GROUPS" in overrides:
            try:
                setting.groups_of(overrides["GROUPS"], str(name))
            except ImproperlyConfigured as exc:
                errors.append(
                    _error(
                        6,
                        f"{exc}.",
                        gettext(
                            "Give a list of auth group names, e.g. 'GROUPS': ['operators'], or leave it "
                            "out."
                        ),
                        f"{where}['GROUPS']",
                    )
                )
    return errors


def _check_flow_limits(
    overrides: dict[str, Any], name: str, where: str
) -> Iterator[checks.CheckMessage]:
    """``RATE``, ``CONCURRENCY``, ``KEY`` and ``KEY_LIMITS`` parse (E100), on a queue of one shard (E101)."""
    try:
        limits = setting.limits_of(overrides, name)
        setting.key_limits_of(overrides, name)
    except ImproperlyConfigured as exc:
        yield _error(
            100,
            f"{exc}.",
            gettext(
                "For example 'RATE': {'LIMIT': 50, 'PERIOD': 1, 'BURST': 50} (at most 50 "
                "claims a second), 'CONCURRENCY': 3 and 'KEY': 'kwargs.tenant_id' (per "
                "tenant), 'KEY_LIMITS': {'shop.tasks.export': {'CONCURRENCY': 2}} with 'KEY': "
                "'task' (per task); see 'Flow limits' in the django-ledger docs."
            ),
            where,
        )
        return
    shards = overrides.get("SHARDS", 1)
    if limits and isinstance(shards, int) and shards > 1:
        yield _error(
            101,
            gettext(
                "RATE, CONCURRENCY or KEY on a queue of %(shards)s SHARDS: a limit is held by "
                "one server, so a queue with limits has one shard."
            )
            % {"shards": shards},
            gettext(
                "Remove SHARDS (or set it to 1), or remove the limits; see 'Flow limits' in "
                "the django-ledger docs."
            ),
            where,
        )


def _check_fused_only(
    overrides: dict[str, Any], defaults: dict[str, Any], where: str
) -> Iterator[checks.CheckMessage]:
    """Flow limits on a queue of the reference path (E102): they run on the fused path only."""
    optimized = overrides.get("OPTIMIZED", defaults.get("OPTIMIZED", True))
    used = [key for key in ("RATE", "CONCURRENCY", "KEY", "KEY_LIMITS") if overrides.get(key)]
    if optimized is False and used:
        yield _error(
            102,
            gettext(
                "%(settings)s on a queue with OPTIMIZED False: flow limits run on the "
                "fused path only, and a ledger on the reference path refuses them."
            )
            % {"settings": ", ".join(used)},
            gettext(
                "Remove OPTIMIZED (True is the default), or remove the limits; see 'Flow "
                "limits' in the django-ledger docs."
            ),
            where,
        )


def _check_limits(section: dict[str, Any], where: str) -> Iterator[checks.CheckMessage]:
    for key, limit in setting.LIMITS.items():
        if key in section and key != "TTL":
            yield from _check_limit(section[key], key, limit, f"{where}[{key!r}]")


def _check_limit(
    value: Any, key: str, limit: setting.Limit, where: str
) -> Iterator[checks.CheckMessage]:
    problem = limit.problem(value)
    if problem is not None:
        hints = {
            "bool": gettext("Give True or False."),
            "int": gettext("Give a whole number, %(range)s.") % {"range": limit.describe()},
            "duration": gettext(
                "Give a timedelta, e.g. timedelta(seconds=30), or a number of seconds."
            ),
        }
        yield _error(30, f"{key} {problem}.", hints[limit.kind], where)


def _check_ranges(
    section: dict[str, Any],
    name: str,
    limits: dict[str, setting.Limit],
    out_of_range: Callable[[str, str, setting.Limit, str], checks.CheckMessage],
) -> list[checks.CheckMessage]:
    """Unknown keys of ``LEDGER[name]`` (E002), and each value out of its range."""
    where = f"LEDGER[{name!r}]"
    errors = list(_unknown_keys(section, frozenset(limits), where))
    for key in sorted(limits.keys() & section.keys()):
        problem = limits[key].problem(section[key])
        if problem is not None:
            errors.append(out_of_range(key, problem, limits[key], f"{where}[{key!r}]"))
    return errors


def _bad_timeout(key: str, problem: str, limit: setting.Limit, where: str) -> checks.Error:
    hint = gettext(
        "Give a timedelta or a number of seconds, %(range)s (default %(default)s), or leave it out."
    ) % {"range": limit.describe(), "default": setting.TIMEOUT_DEFAULTS[key]}
    return _error(15, f"{key} {problem}.", hint, where)


def _bad_durability(key: str, problem: str, limit: setting.Limit, where: str) -> checks.Error:
    hint = (
        gettext(
            "Give an int, %(range)s (default %(default)s), or leave it out; see "
            "'Redis Cluster' in the django-ledger docs."
        )
        if limit.kind == "int"
        else gettext(
            "Give a timedelta or seconds, %(range)s (default %(default)s), or "
            "leave it out; see 'Redis Cluster' in the django-ledger docs."
        )
    ) % {"range": limit.describe(), "default": setting.DURABILITY_DEFAULTS[key]}
    return _error(16, f"{key} {problem}.", hint, where)


# -- the dispatch registry --------------------------------------------------------------


def _check_dispatch(dispatch: dict[str, Any]) -> list[checks.CheckMessage]:
    where = "LEDGER['DISPATCH']"
    errors: list[checks.CheckMessage] = list(_unknown_keys(dispatch, setting.DISPATCH_KEYS, where))
    config = {**setting.DISPATCH_DEFAULTS, **dispatch}
    errors += _check_backend(config["BACKEND"])
    if not setting.usable_name(config["NAMESPACE"]):
        errors.append(_bad_namespace(config["NAMESPACE"], f"{where}['NAMESPACE']"))
    errors += _check_limit(config["TTL"], "TTL", setting.LIMITS["TTL"], f"{where}['TTL']")
    node_id = config["NODE_ID"]
    if node_id is not None and (not isinstance(node_id, str) or not node_id.strip()):
        errors.append(
            _error(
                22,
                gettext("Must be None or a non-empty str, got %(node_id)r.") % {"node_id": node_id},
                gettext("Leave it None to use the host name and process id."),
                f"{where}['NODE_ID']",
            )
        )
    if config["CONNECTION"] is not None:
        errors += check_connection(config["CONNECTION"], f"{where}['CONNECTION']")
    try:
        setting.dispatch_groups_of(config["GROUPS"])
    except ImproperlyConfigured as exc:
        errors.append(
            _error(
                23,
                f"{exc}.",
                gettext(
                    "Map key prefixes to lists of auth group names, e.g. 'GROUPS': {'emails:': "
                    "['emails-team']}, or leave it out."
                ),
                f"{where}['GROUPS']",
            )
        )
    return errors


def _check_backend(path: Any) -> list[checks.CheckMessage]:
    from ..core.dispatch import DispatchRegistry

    where = "LEDGER['DISPATCH']['BACKEND']"
    hint = gettext(
        "Use 'django_ledger.core.dispatch.RedisDispatchRegistry' (the default) or "
        "'django_ledger.core.dispatch.MemoryDispatchRegistry' (tests, one process)."
    )
    backend, why = imported(path) if isinstance(path, str) else (None, None)
    if why is not None:
        return [
            _error(
                20,
                gettext("%(path)r does not import: %(why)s.") % {"path": path, "why": why},
                hint,
                where,
            )
        ]
    if backend is None:
        return [
            _error(
                20, gettext("Must be a dotted path, got %(path)r.") % {"path": path}, hint, where
            )
        ]
    if not isinstance(backend, type) or not issubclass(backend, DispatchRegistry):
        return [
            _error(
                21,
                gettext("%(path)r is not a DispatchRegistry subclass.") % {"path": path},
                hint,
                where,
            )
        ]
    return []
