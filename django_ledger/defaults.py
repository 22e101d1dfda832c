"""The ``LEDGER`` setting's defaults, limits and typed sections, in one place.

``conf.LedgerSettings`` reads the setting; this module says what its values may be
and turns them into typed objects, so the settings object and the system checks agree.
"""

from __future__ import annotations

import math
import os
import re
import socket
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from .core.layout import MAX_SHARDS
from .core.limits import Limits, Rate, check_key_path
from .core.timing import MAX_DURATION_MS

__all__ = [
    "DEFAULTS",
    "DISPATCH_DEFAULTS",
    "DISPATCH_KEYS",
    "DURABILITY_DEFAULTS",
    "DURABILITY_KEYS",
    "DURABILITY_LIMITS",
    "LIMITS",
    "QUEUE_KEYS",
    "RATE_KEYS",
    "SCHEDULE_DEFAULTS",
    "SCHEDULE_KEYS",
    "TIMEOUT_DEFAULTS",
    "TIMEOUT_KEYS",
    "TIMEOUT_LIMIT",
    "TOP_DEFAULTS",
    "TOP_KEYS",
    "DispatchSettings",
    "Durability",
    "Limit",
    "QueueSettings",
    "Timeouts",
    "as_timedelta",
    "checked_name",
    "default_node_id",
    "dispatch_groups_of",
    "dispatch_settings_of",
    "durability_of",
    "groups_of",
    "key_limits_of",
    "limits_of",
    "timeouts_of",
    "usable_name",
]

#: What every queue gets unless the ``LEDGER`` setting says otherwise.
DEFAULTS: dict[str, Any] = {
    "MAX_PAYLOAD_BYTES": 1_048_576,
    "MAX_RECORDS": 100_000,
    "OPTIMIZED": True,
    "MAX_ATTEMPTS": 16,
    "MAX_RETAINED": 100_000,
    "RETENTION": timedelta(days=7),
    "LEASE": timedelta(seconds=30),
    # How many hash tags (cluster slots) the queue is spread over (docs/cluster.md).
    "SHARDS": 1,
}
#: ``LEDGER['DISPATCH']``: the dispatch registry.
DISPATCH_DEFAULTS: dict[str, Any] = {
    "BACKEND": "django_ledger.core.dispatch.RedisDispatchRegistry",
    "CONNECTION": None,
    "NAMESPACE": "kaal",
    "TTL": 7 * 24 * 60 * 60,
    "NODE_ID": None,
    # Key prefix -> the auth groups whose members may use the keys it starts (in the
    # API); a key no prefix starts is for users who reach every queue (see
    # django_ledger.permissions.can_reach_dispatch_key).
    "GROUPS": {},
}
#: The top level of ``LEDGER`` (besides ``DEFAULTS`` and ``DISPATCH``).
TOP_DEFAULTS: dict[str, Any] = {
    "CONNECTION": "default",
    "NAMESPACE": "ledger",
    "QUEUES": {"default": {}},
    # Workers keep outcome counters for the admin's charts (docs/admin.md).
    "COUNTERS": True,
    "RUNTIME_SCHEDULES": True,  # schedules stored in Redis fire (docs/scheduler.md)
}
#: ``LEDGER['TIMEOUTS']``: seconds a client the ledger builds (from a URL or cluster
#: nodes) waits to connect, and for each reply, before it gives up. Without them an
#: older redis-py (before 8) waits for ever on a Redis that stalls.
TIMEOUT_DEFAULTS: dict[str, Any] = {"CONNECT": 5, "SOCKET": 10}
TIMEOUT_KEYS = frozenset(TIMEOUT_DEFAULTS)
#: ``LEDGER['DURABILITY']``: after each write, ``WAIT`` until ``REPLICAS`` replicas have
#: acknowledged it, for at most ``TIMEOUT`` (seconds, or a timedelta); fewer in time raises
#: ``NotReplicated``. ``REPLICAS`` 0, the default, sends no ``WAIT`` (docs/cluster.md).
DURABILITY_DEFAULTS: dict[str, Any] = {"REPLICAS": 0, "TIMEOUT": 1}
DURABILITY_KEYS = frozenset(DURABILITY_DEFAULTS)
#: Keys a queue's entry in ``QUEUES`` may hold: overrides of ``DEFAULTS``, ``GROUPS``, and
#: ``HANDLER`` (the dotted path of a function the worker calls with each raw job).
#: The task options a queue may set for its tasks (``django_ledger.tasks.options``) too.
QUEUE_KEYS = frozenset(DEFAULTS) | {
    "GROUPS",
    "HANDLER",
    "BACKOFF_BASE",
    "BACKOFF_CAP",
    "RETRY_ON",
    "TIMEOUT",
    "UNIQUE",
    "RATE",
    "CONCURRENCY",
    "KEY",
    "KEY_LIMITS",
}
#: ``QUEUES[name]['RATE']``'s keys: at most ``LIMIT`` claims per ``PERIOD`` (seconds, or
#: a timedelta), ``BURST`` of them at once after a lull (default: ``LIMIT``).
RATE_KEYS = frozenset({"LIMIT", "PERIOD", "BURST"})
#: ``LEDGER['SCHEDULES'][key]``: what a schedule gets unless it says otherwise; ``TASK``
#: and one of ``CRON``, ``EVERY`` or ``AT`` have none (``django_ledger.schedules.config``).
SCHEDULE_DEFAULTS: dict[str, Any] = {
    "TIMEZONE": "UTC",
    "ARGS": (),
    "KWARGS": {},
    "QUEUE": None,  # None: the task's own queue_name, else "default"
    "PRIORITY": 0,
    "MISFIRE": "latest",
    "GRACE": timedelta(hours=1),
    "ENABLED": True,
    "MONITOR": None,  # {"URL": ping URL} and/or {"SENTRY": monitor slug}
}
SCHEDULE_KEYS = frozenset(SCHEDULE_DEFAULTS) | {"TASK", "CRON", "EVERY", "AT"}
#: Every top-level key; ``API`` belongs to the REST API (``django_ledger.api.conf``).
TOP_KEYS = frozenset(TOP_DEFAULTS) | {
    "DEFAULTS",
    "DISPATCH",
    "API",
    "TIMEOUTS",
    "SCHEDULES",
    "DURABILITY",
}
DISPATCH_KEYS = frozenset(DISPATCH_DEFAULTS)

_NAME = re.compile(r"[^\s{}\x00-\x1f\x7f]{1,100}")
_MAX_DURATION_S = MAX_DURATION_MS / 1000


@dataclass(frozen=True)
class Limit:
    """The type and range one numeric setting must have."""

    kind: str  # "int", "bool" or "duration"
    low: float = 0
    high: float = 0
    low_inclusive: bool = True

    def problem(self, value: Any) -> str | None:
        """Say what is wrong with ``value`` for this setting, or ``None``."""
        if self.kind == "bool":
            return None if isinstance(value, bool) else f"must be True or False, got {value!r}"
        if self.kind == "int":
            if not isinstance(value, int) or isinstance(value, bool):
                return f"must be an int, got {value!r}"
            number: float = value
        else:
            if isinstance(value, timedelta):
                number = value.total_seconds()
            elif isinstance(value, int | float) and not isinstance(value, bool):
                number = value
            else:
                return f"must be a timedelta or a number of seconds, got {value!r}"
            if not math.isfinite(number):
                return f"must be finite, got {value!r}"
        too_low = number < self.low if self.low_inclusive else number <= self.low
        if too_low or number > self.high:
            return f"must be {self.describe()}, got {value!r}"
        return None

    def check(self, value: Any, where: str) -> Any:
        """Return ``value``, or raise ``ImproperlyConfigured`` saying what is wrong at ``where``."""
        problem = self.problem(value)
        if problem is not None:
            raise ImproperlyConfigured(f"{where} {problem}")
        return value

    def describe(self) -> str:
        unit = " seconds" if self.kind == "duration" else ""
        low = "at least" if self.low_inclusive else "more than"
        return f"{low} {_number(self.low)} and at most {_number(self.high)}{unit}"


def _number(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


#: The range of every numeric setting (queue settings and the dispatch ``TTL``).
LIMITS: dict[str, Limit] = {
    "MAX_PAYLOAD_BYTES": Limit("int", 1, 512 * 1024 * 1024),
    "MAX_RECORDS": Limit("int", 1, 2**32 - 1),
    "OPTIMIZED": Limit("bool"),
    "MAX_ATTEMPTS": Limit("int", 1, 1_000_000),
    "MAX_RETAINED": Limit("int", 1, 2**32 - 1),
    "RETENTION": Limit("duration", 0, _MAX_DURATION_S),
    "LEASE": Limit("duration", 0, _MAX_DURATION_S, low_inclusive=False),
    "SHARDS": Limit("int", 1, MAX_SHARDS),
    "TTL": Limit("int", 1, 10 * 366 * 24 * 3600),
}
#: The range of each of ``TIMEOUTS``: more than nothing, at most an hour.
TIMEOUT_LIMIT = Limit("duration", 0, 3600, low_inclusive=False)
#: The ranges of ``DURABILITY``'s keys.
DURABILITY_LIMITS: dict[str, Limit] = {
    "REPLICAS": Limit("int", 0, 100),
    "TIMEOUT": Limit("duration", 0, 3600, low_inclusive=False),
}


@dataclass(frozen=True)
class QueueSettings:
    """One queue's settings, defaults filled in."""

    name: str
    max_payload_bytes: int
    max_records: int
    optimized: bool
    max_attempts: int
    max_retained: int
    retention: timedelta
    lease: timedelta
    groups: tuple[str, ...] = ()
    shards: int = 1
    #: ``RATE`` and ``CONCURRENCY``: the defaults of the limits stored in Redis.
    limits: Limits = Limits()  # noqa: RUF009 - frozen, so one shared instance is safe
    #: ``KEY_LIMITS``: each key's limits of its own, by key (defaults, as ``limits``).
    key_limits: tuple[tuple[str, Limits], ...] = ()


@dataclass(frozen=True)
class DispatchSettings:
    """``LEDGER['DISPATCH']``, defaults filled in."""

    backend: str
    connection: Any
    namespace: str
    ttl: int
    node_id: str
    #: ``GROUPS`` as (key prefix, group names) pairs, the longest prefix first.
    groups: tuple[tuple[str, tuple[str, ...]], ...] = ()


def dispatch_settings_of(config: dict[str, Any]) -> DispatchSettings:
    """Check and type a full ``DISPATCH`` dict (defaults already merged)."""
    backend = config["BACKEND"]
    if not isinstance(backend, str) or not backend:
        raise ImproperlyConfigured(
            f"LEDGER['DISPATCH']['BACKEND'] must be a dotted path, got {backend!r}"
        )
    ttl = LIMITS["TTL"].check(config["TTL"], "LEDGER['DISPATCH']['TTL']")
    node_id = config["NODE_ID"]
    if node_id is not None and (not isinstance(node_id, str) or not node_id.strip()):
        raise ImproperlyConfigured(
            f"LEDGER['DISPATCH']['NODE_ID'] must be None or a non-empty str, got {node_id!r}"
        )
    return DispatchSettings(
        backend=backend,
        connection=config["CONNECTION"],
        namespace=checked_name(config["NAMESPACE"], "LEDGER['DISPATCH']['NAMESPACE']"),
        ttl=ttl,
        node_id=node_id or default_node_id(),
        groups=dispatch_groups_of(config["GROUPS"]),
    )


def dispatch_groups_of(value: Any) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Check ``DISPATCH['GROUPS']`` and return its (prefix, groups) pairs, longest first."""
    where = "LEDGER['DISPATCH']['GROUPS']"
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ImproperlyConfigured(
            f"{where} must be a dict of key prefix -> list of group names, got {value!r}"
        )
    pairs: list[tuple[str, tuple[str, ...]]] = []
    for prefix, groups in value.items():
        if not isinstance(prefix, str):
            raise ImproperlyConfigured(f"{where} has the key {prefix!r}, not a key prefix (a str)")
        pairs.append((prefix, _group_names(groups, f"{where}[{prefix!r}]")))
    pairs.sort(key=lambda pair: len(pair[0]), reverse=True)
    return tuple(pairs)


def usable_name(value: object) -> bool:
    """Say whether ``value`` can be a namespace or queue name (part of a hash tag)."""
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def checked_name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not usable_name(value):
        raise ImproperlyConfigured(
            f"{where} must be 1 to 100 characters without whitespace, braces or control "
            f"characters, got {value!r}"
        )
    return value


def groups_of(value: Any, queue: str) -> tuple[str, ...]:
    if value is None:
        return ()
    return _group_names(value, f"LEDGER['QUEUES'][{queue!r}]['GROUPS']")


def _group_names(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ImproperlyConfigured(f"{where} must be a list of group names, got {value!r}")
    for group in value:
        if not isinstance(group, str) or not group:
            raise ImproperlyConfigured(f"{where} holds {group!r}, not a group name")
    return tuple(value)


def as_timedelta(value: Any) -> timedelta:
    return value if isinstance(value, timedelta) else timedelta(seconds=value)


def default_node_id() -> str:
    """Return this process's node id: host name and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(frozen=True)
class Timeouts:
    """``LEDGER['TIMEOUTS']`` in seconds: redis-py's connect and socket time-outs."""

    connect: float
    socket: float


def timeouts_of(config: dict[str, Any]) -> Timeouts:
    """Check and type a full ``TIMEOUTS`` dict (defaults already merged)."""
    connect, reply = (
        as_timedelta(
            TIMEOUT_LIMIT.check(config[key], f"LEDGER['TIMEOUTS'][{key!r}]")
        ).total_seconds()
        for key in ("CONNECT", "SOCKET")
    )
    return Timeouts(connect=connect, socket=reply)


@dataclass(frozen=True)
class Durability:
    """``LEDGER['DURABILITY']``: the replicas each write waits for, and for how long."""

    replicas: int
    timeout_ms: int


def durability_of(config: dict[str, Any]) -> Durability:
    """Check and type a full ``DURABILITY`` dict (defaults already merged)."""
    replicas, timeout = (
        DURABILITY_LIMITS[key].check(config[key], f"LEDGER['DURABILITY'][{key!r}]")
        for key in ("REPLICAS", "TIMEOUT")
    )
    seconds = as_timedelta(timeout).total_seconds()
    return Durability(replicas=replicas, timeout_ms=max(1, math.ceil(seconds * 1000)))


_MAX_LIMIT = 1_000_000_000


def limits_of(overrides: dict[str, Any], queue: str) -> Limits:
    """Check and type a queue's ``RATE``, ``CONCURRENCY`` and ``KEY`` (absent or ``None``:
    no limit; with a ``KEY`` the limits hold per key, and keys take turns)."""
    return _limits_at(overrides, f"LEDGER['QUEUES'][{queue!r}]")


def key_limits_of(overrides: dict[str, Any], queue: str) -> tuple[tuple[str, Limits], ...]:
    """Check and type a queue's ``KEY_LIMITS``: ``{key: {"RATE": ..., "CONCURRENCY": ...}}``,
    each key's limits of its own over the queue's (docs/limits.md, "Per task"), by key."""
    where = f"LEDGER['QUEUES'][{queue!r}]['KEY_LIMITS']"
    declared = overrides.get("KEY_LIMITS")
    if declared is None:
        return ()
    if not isinstance(declared, dict):
        raise ImproperlyConfigured(f"{where} must be a dict of key to limits, got {declared!r}")
    if declared and overrides.get("KEY") is None:
        raise ImproperlyConfigured(
            f"{where} needs the queue's KEY (e.g. 'KEY': 'task'): a key's limits hold per key"
        )
    found = []
    for key, value in sorted(declared.items(), key=lambda item: str(item[0])):
        if (
            not isinstance(key, str)
            or not key
            or len(key.encode("utf-8", "surrogatepass")) > 256
            or any(ord(c) < 32 or 127 <= ord(c) < 160 for c in key)
        ):
            raise ImproperlyConfigured(f"{where} has {key!r}, which cannot be a key")
        if not isinstance(value, dict) or not value.keys() <= {"RATE", "CONCURRENCY"}:
            raise ImproperlyConfigured(
                f"{where}[{key!r}] must be a dict with RATE and/or CONCURRENCY, got {value!r}"
            )
        limits = _limits_at(value, f"{where}[{key!r}]")
        if not limits:
            raise ImproperlyConfigured(f"{where}[{key!r}] sets neither RATE nor CONCURRENCY")
        found.append((key, limits))
    return tuple(found)


def _limits_at(overrides: dict[str, Any], where: str) -> Limits:
    concurrency = overrides.get("CONCURRENCY")
    if concurrency is not None and (
        isinstance(concurrency, bool)
        or not isinstance(concurrency, int)
        or not 1 <= concurrency <= _MAX_LIMIT
    ):
        raise ImproperlyConfigured(
            f"{where}['CONCURRENCY'] must be None or an int from 1 to {_MAX_LIMIT:,}, "
            f"got {concurrency!r}"
        )
    key_path = overrides.get("KEY")
    if key_path is not None:
        try:
            check_key_path(key_path)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{where}['KEY']: {exc}") from None
    rate = overrides.get("RATE")
    if rate is None:
        return Limits(None, concurrency, key_path)
    if not isinstance(rate, dict) or not rate.keys() <= RATE_KEYS or "LIMIT" not in rate:
        raise ImproperlyConfigured(
            f"{where}['RATE'] must be a dict with LIMIT and optionally PERIOD and BURST, "
            f"got {rate!r}"
        )
    limit: Any = rate["LIMIT"]
    burst: Any = rate.get("BURST", limit)
    for key, value in (("LIMIT", limit), ("BURST", burst)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= _MAX_LIMIT:
            raise ImproperlyConfigured(
                f"{where}['RATE']['{key}'] must be an int from 1 to {_MAX_LIMIT:,}, got {value!r}"
            )
    period = Limit("duration", 0.001, 366 * 24 * 3600).check(
        rate.get("PERIOD", 1), f"{where}['RATE']['PERIOD']"
    )
    period_ms = round(as_timedelta(period).total_seconds() * 1000)
    return Limits(Rate(limit, period_ms, burst), concurrency, key_path)
