"""The ``LEDGER`` setting: defaults in one place, read on every access.

This module and the rest of the Django layer are the only places that read
``django.conf.settings``; the core takes plain values. Every property reads the
setting afresh, so ``override_settings`` works; connections (one pool per process)
and dispatch registries are built once per process and configuration, and
``reset_connections`` forgets them.
"""

from __future__ import annotations

import math
import os
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .connections import (
    URL_SCHEMES,
    cached,
    client_for,
    registries,
    reset_connections,
)
from .ledger import Ledger
from .timing import MAX_DURATION_MS

if TYPE_CHECKING:
    from .dispatch import DispatchRegistry

__all__ = [
    "DEFAULTS",
    "DISPATCH_DEFAULTS",
    "LIMITS",
    "QUEUE_KEYS",
    "TOP_DEFAULTS",
    "URL_SCHEMES",
    "DispatchSettings",
    "Limit",
    "QueueSettings",
    "connection",
    "dispatch_node_id",
    "get_dispatch_registry",
    "get_ledger",
    "ledger_settings",
    "reset_connections",
]

#: What every queue gets unless the ``LEDGER`` setting says otherwise.
DEFAULTS: dict[str, Any] = {
    "MAX_PAYLOAD_BYTES": 1_048_576,
    "MAX_RECORDS": 100_000,
    "OPTIMIZED": True,
    "MAX_ATTEMPTS": 16,
    "RETENTION": timedelta(days=7),
    "LEASE": timedelta(seconds=30),
}
#: ``LEDGER['DISPATCH']``: the dispatch registry.
DISPATCH_DEFAULTS: dict[str, Any] = {
    "BACKEND": "django_ledger.dispatch.RedisDispatchRegistry",
    "CONNECTION": None,
    "NAMESPACE": "kaal",
    "TTL": 7 * 24 * 60 * 60,
    "NODE_ID": None,
}
#: The top level of ``LEDGER`` (besides ``DEFAULTS`` and ``DISPATCH``).
TOP_DEFAULTS: dict[str, Any] = {
    "CONNECTION": "default",
    "NAMESPACE": "ledger",
    "QUEUES": {"default": {}},
}
#: Keys a queue's entry in ``QUEUES`` may hold: overrides of ``DEFAULTS``, and ``GROUPS``.
QUEUE_KEYS = frozenset(DEFAULTS) | {"GROUPS"}
#: Every top-level key; ``API`` belongs to the REST API (``django_ledger.api.conf``).
TOP_KEYS = frozenset(TOP_DEFAULTS) | {"DEFAULTS", "DISPATCH", "API"}
DISPATCH_KEYS = frozenset(DISPATCH_DEFAULTS)
#: URL schemes a connection may use; anything else with ``://`` is a bad URL.

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
    "RETENTION": Limit("duration", 0, _MAX_DURATION_S),
    "LEASE": Limit("duration", 0, _MAX_DURATION_S, low_inclusive=False),
    "TTL": Limit("int", 1, 10 * 366 * 24 * 3600),
}


@dataclass(frozen=True)
class QueueSettings:
    """One queue's settings, defaults filled in."""

    name: str
    max_payload_bytes: int
    max_records: int
    optimized: bool
    max_attempts: int
    retention: timedelta
    lease: timedelta
    groups: tuple[str, ...] = ()


@dataclass(frozen=True)
class DispatchSettings:
    """``LEDGER['DISPATCH']``, defaults filled in."""

    backend: str
    connection: Any
    namespace: str
    ttl: int
    node_id: str


class LedgerSettings:
    """Typed access to ``settings.LEDGER``, read afresh on every access.

    Values of the wrong type raise ``ImproperlyConfigured`` naming the setting; the
    system checks (``django_ledger.checks``) report the same problems ahead of time.
    """

    @property
    def raw(self) -> dict[str, Any]:
        value = getattr(django_settings, "LEDGER", {})
        if not isinstance(value, dict):
            raise ImproperlyConfigured(
                f"the LEDGER setting must be a dict, not {type(value).__name__}"
            )
        return value

    def _section(self, name: str) -> dict[str, Any]:
        value = self.raw.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise ImproperlyConfigured(
                f"LEDGER[{name!r}] must be a dict, not {type(value).__name__}"
            )
        return value

    @property
    def connection(self) -> Any:
        """``LEDGER['CONNECTION']``: a cache alias, a URL or ``{"CLUSTER": [...]}``."""
        return self.raw.get("CONNECTION", TOP_DEFAULTS["CONNECTION"])

    @property
    def namespace(self) -> str:
        """``LEDGER['NAMESPACE']``: the first half of every queue's hash tag."""
        return _name(self.raw.get("NAMESPACE", TOP_DEFAULTS["NAMESPACE"]), "LEDGER['NAMESPACE']")

    @property
    def defaults(self) -> dict[str, Any]:
        """``LEDGER['DEFAULTS']`` over the built-in defaults."""
        return {**DEFAULTS, **self._section("DEFAULTS")}

    @property
    def queues(self) -> dict[str, dict[str, Any]]:
        """``LEDGER['QUEUES']``: queue name -> its overrides (and ``GROUPS``)."""
        queues = self.raw.get("QUEUES", TOP_DEFAULTS["QUEUES"])
        if not isinstance(queues, dict):
            raise ImproperlyConfigured(
                f"LEDGER['QUEUES'] must be a dict of queue name -> settings, "
                f"not {type(queues).__name__}"
            )
        result: dict[str, dict[str, Any]] = {}
        for name, overrides in queues.items():
            if overrides is not None and not isinstance(overrides, dict):
                raise ImproperlyConfigured(
                    f"LEDGER['QUEUES'][{name!r}] must be a dict, not {type(overrides).__name__}"
                )
            result[name] = dict(overrides or {})
        return result

    @property
    def queue_names(self) -> list[str]:
        return list(self.queues)

    def queue(self, name: str) -> QueueSettings:
        """Return queue ``name``'s settings; an unknown queue names the configured ones."""
        queues = self.queues
        if name not in queues:
            known = ", ".join(repr(queue) for queue in queues) or "none"
            raise ImproperlyConfigured(
                f"unknown ledger queue {name!r}; LEDGER['QUEUES'] configures: {known}"
            )
        defaults = self.defaults
        overrides = queues[name]
        values: dict[str, Any] = {}
        for key in DEFAULTS:
            if key in overrides:
                where, value = f"LEDGER['QUEUES'][{name!r}][{key!r}]", overrides[key]
            else:
                where, value = f"LEDGER['DEFAULTS'][{key!r}]", defaults[key]
            problem = LIMITS[key].problem(value)
            if problem is not None:
                raise ImproperlyConfigured(f"{where} {problem}")
            values[key] = value
        return QueueSettings(
            name=_name(name, "a queue name in LEDGER['QUEUES']"),
            max_payload_bytes=values["MAX_PAYLOAD_BYTES"],
            max_records=values["MAX_RECORDS"],
            optimized=values["OPTIMIZED"],
            max_attempts=values["MAX_ATTEMPTS"],
            retention=_as_timedelta(values["RETENTION"]),
            lease=_as_timedelta(values["LEASE"]),
            groups=_groups(overrides.get("GROUPS"), name),
        )

    @property
    def dispatch(self) -> dict[str, Any]:
        """``LEDGER['DISPATCH']`` over its defaults, as a plain dict."""
        return {**DISPATCH_DEFAULTS, **self._section("DISPATCH")}

    @property
    def dispatch_settings(self) -> DispatchSettings:
        """``LEDGER['DISPATCH']`` checked and typed."""
        return dispatch_settings_of(self.dispatch)


def dispatch_settings_of(config: dict[str, Any]) -> DispatchSettings:
    """Check and type a full ``DISPATCH`` dict (defaults already merged)."""
    backend = config["BACKEND"]
    if not isinstance(backend, str) or not backend:
        raise ImproperlyConfigured(
            f"LEDGER['DISPATCH']['BACKEND'] must be a dotted path, got {backend!r}"
        )
    problem = LIMITS["TTL"].problem(config["TTL"])
    if problem is not None:
        raise ImproperlyConfigured(f"LEDGER['DISPATCH']['TTL'] {problem}")
    node_id = config["NODE_ID"]
    if node_id is not None and (not isinstance(node_id, str) or not node_id.strip()):
        raise ImproperlyConfigured(
            f"LEDGER['DISPATCH']['NODE_ID'] must be None or a non-empty str, got {node_id!r}"
        )
    return DispatchSettings(
        backend=backend,
        connection=config["CONNECTION"],
        namespace=_name(config["NAMESPACE"], "LEDGER['DISPATCH']['NAMESPACE']"),
        ttl=config["TTL"],
        node_id=node_id or default_node_id(),
    )


ledger_settings = LedgerSettings()


def usable_name(value: object) -> bool:
    """Say whether ``value`` can be a namespace or queue name (part of a hash tag)."""
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not usable_name(value):
        raise ImproperlyConfigured(
            f"{where} must be 1 to 100 characters without whitespace, braces or control "
            f"characters, got {value!r}"
        )
    return value


def _groups(value: Any, queue: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not isinstance(value, list | tuple):
        raise ImproperlyConfigured(
            f"LEDGER['QUEUES'][{queue!r}]['GROUPS'] must be a list of group names, got {value!r}"
        )
    for group in value:
        if not isinstance(group, str) or not group:
            raise ImproperlyConfigured(
                f"LEDGER['QUEUES'][{queue!r}]['GROUPS'] holds {group!r}, not a group name"
            )
    return tuple(value)


def _as_timedelta(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    return timedelta(seconds=value)


# -- connections ----------------------------------------------------------------------


def connection(spec: Any = None) -> Any:
    """Return the redis-py client for a connection spec (default: ``LEDGER['CONNECTION']``)."""
    return client_for(ledger_settings.connection if spec is None else spec)


# -- entry points ---------------------------------------------------------------------


def get_ledger(queue: str = "default") -> Ledger:
    """Build the ledger of ``queue`` from the ``LEDGER`` setting."""
    config = ledger_settings.queue(queue)
    namespace = ledger_settings.namespace
    client = connection()
    try:
        return Ledger(
            client,
            namespace,
            queue,
            max_payload_bytes=config.max_payload_bytes,
            max_records=config.max_records,
            optimized=config.optimized,
            max_attempts=config.max_attempts,
            retention=config.retention,
        )
    except ValueError as exc:
        # The one left is a client that decodes responses (decode_responses=True).
        raise ImproperlyConfigured(
            f"LEDGER['CONNECTION'] {ledger_settings.connection!r}: {exc}"
        ) from exc


def default_node_id() -> str:
    """Return this process's node id: host name and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def dispatch_node_id() -> str:
    """Return ``LEDGER['DISPATCH']['NODE_ID']``, or host name and process id."""
    return ledger_settings.dispatch_settings.node_id


def get_dispatch_registry(**overrides: Any) -> DispatchRegistry:
    """Return the dispatch registry ``LEDGER['DISPATCH']`` configures, one per process.

    ``overrides`` replace keys of ``LEDGER['DISPATCH']`` (``backend=``, ``ttl=``, ...).
    A ``MemoryDispatchRegistry`` (or subclass) is built with ``ttl`` alone and kept, so
    its records live as long as the process; any other backend is called with the
    Redis client, ``namespace=`` and ``ttl=``.
    """
    from .dispatch import DispatchRegistry, MemoryDispatchRegistry

    unknown = sorted(key for key in overrides if key.upper() not in DISPATCH_KEYS)
    if unknown:
        raise TypeError(f"unknown dispatch setting(s): {', '.join(unknown)}")
    raw = ledger_settings.dispatch
    raw.update((key.upper(), value) for key, value in overrides.items())
    config = dispatch_settings_of(raw)
    path = config.backend
    try:
        backend = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"LEDGER['DISPATCH']['BACKEND'] = {path!r} does not import: {exc}"
        ) from exc
    if not isinstance(backend, type) or not issubclass(backend, DispatchRegistry):
        raise ImproperlyConfigured(
            f"LEDGER['DISPATCH']['BACKEND'] = {path!r} is not a DispatchRegistry subclass"
        )
    if issubclass(backend, MemoryDispatchRegistry):
        key: tuple[Any, ...] = (path, config.ttl)
        memory: DispatchRegistry = cached(registries, key, lambda: backend(ttl=config.ttl))
        return memory
    # Keyed by the connection actually used, so a registry follows LEDGER['CONNECTION'].
    spec = ledger_settings.connection if config.connection is None else config.connection
    key = (path, repr(spec), config.namespace, config.ttl)
    client = connection(spec)
    factory: Callable[..., DispatchRegistry] = backend
    registry: DispatchRegistry = cached(
        registries, key, lambda: factory(client, namespace=config.namespace, ttl=config.ttl)
    )
    return registry
