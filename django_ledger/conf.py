"""The ``LEDGER`` setting: defaults in one place, read on every access.

This module and the rest of the Django layer are the only places that read
``django.conf.settings``; the core takes plain values. Every property reads the
setting afresh, so ``override_settings`` works; connections (one pool per process)
and dispatch registries are built once per process and configuration, and
``reset_connections`` forgets them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
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
from .core.errors import LedgerUnavailable
from .core.ledger import Ledger
from .core.limits import Limits
from .core.sharded import AnyLedger, ShardedLedger
from .defaults import (
    DEFAULTS,
    DISPATCH_DEFAULTS,
    DISPATCH_KEYS,
    DURABILITY_DEFAULTS,
    LIMITS,
    QUEUE_KEYS,
    TIMEOUT_DEFAULTS,
    TOP_DEFAULTS,
    TOP_KEYS,
    DispatchSettings,
    Durability,
    Limit,
    QueueSettings,
    Timeouts,
    as_timedelta,
    checked_name,
    dispatch_settings_of,
    durability_of,
    groups_of,
    key_limits_of,
    limits_of,
    timeouts_of,
    usable_name,
)

if TYPE_CHECKING:
    from .core.dispatch import DispatchRegistry

__all__ = [
    "DEFAULTS",
    "DISPATCH_DEFAULTS",
    "LIMITS",
    "QUEUE_KEYS",
    "TIMEOUT_DEFAULTS",
    "TOP_DEFAULTS",
    "TOP_KEYS",
    "URL_SCHEMES",
    "DispatchSettings",
    "Limit",
    "QueueSettings",
    "Timeouts",
    "build_ledger",
    "connection",
    "dispatch_node_id",
    "dispatch_settings_of",
    "get_dispatch_registry",
    "get_ledger",
    "ledger_settings",
    "reset_connections",
    "usable_name",
]


class LedgerSettings:
    """Typed access to ``settings.LEDGER``, read afresh on every access.

    Values of the wrong type raise ``ImproperlyConfigured`` naming the setting; the
    system checks (``django_ledger.checks``) report the same problems ahead of time.
    """

    #: The last ``TIMEOUTS`` section read, and its parsed value.
    _timeouts: tuple[dict[str, Any], Timeouts] | None = None

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
    def timeouts(self) -> Timeouts:
        """``LEDGER['TIMEOUTS']`` over its defaults: the connect and socket time-outs."""
        section = self._section("TIMEOUTS")
        known = self._timeouts
        # Parsed again only when the section changes (compared by value: a dict changed
        # in place, or replaced by override_settings, is read afresh).
        if known is not None and known[0] == section:
            return known[1]
        timeouts = timeouts_of({**TIMEOUT_DEFAULTS, **section})
        self._timeouts = (dict(section), timeouts)
        return timeouts

    @property
    def durability(self) -> Durability:
        """``LEDGER['DURABILITY']`` over its defaults: the replicas each write waits for."""
        return durability_of({**DURABILITY_DEFAULTS, **self._section("DURABILITY")})

    @property
    def namespace(self) -> str:
        """``LEDGER['NAMESPACE']``: the first half of every queue's hash tag."""
        return checked_name(
            self.raw.get("NAMESPACE", TOP_DEFAULTS["NAMESPACE"]), "LEDGER['NAMESPACE']"
        )

    def _flag(self, name: str) -> bool:
        value = self.raw.get(name, TOP_DEFAULTS[name])
        if not isinstance(value, bool):
            raise ImproperlyConfigured(f"LEDGER[{name!r}] must be True or False, not {value!r}")
        return value

    @property
    def counters(self) -> bool:
        """``LEDGER['COUNTERS']``: whether workers keep counters for the charts."""
        return self._flag("COUNTERS")

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
        values = {
            key: LIMITS[key].check(overrides[key], f"LEDGER['QUEUES'][{name!r}][{key!r}]")
            if key in overrides
            else LIMITS[key].check(defaults[key], f"LEDGER['DEFAULTS'][{key!r}]")
            for key in DEFAULTS
        }
        return QueueSettings(
            name=checked_name(name, "a queue name in LEDGER['QUEUES']"),
            max_payload_bytes=values["MAX_PAYLOAD_BYTES"],
            max_records=values["MAX_RECORDS"],
            optimized=values["OPTIMIZED"],
            max_attempts=values["MAX_ATTEMPTS"],
            max_retained=values["MAX_RETAINED"],
            retention=as_timedelta(values["RETENTION"]),
            lease=as_timedelta(values["LEASE"]),
            groups=groups_of(overrides.get("GROUPS"), name),
            shards=values["SHARDS"],
            limits=self._limits(overrides, name, values["SHARDS"], values["OPTIMIZED"]),
            key_limits=key_limits_of(overrides, name),
        )

    @staticmethod
    def _limits(overrides: dict[str, Any], name: str, shards: int, optimized: bool) -> Limits:
        limits = limits_of(overrides, name)
        if limits and not optimized:
            raise ImproperlyConfigured(
                f"LEDGER['QUEUES'][{name!r}] has RATE, CONCURRENCY or KEY and OPTIMIZED False: "
                "flow limits run on the fused path only (see 'Flow limits' in the "
                "django-ledger docs)"
            )
        if limits and shards > 1:
            raise ImproperlyConfigured(
                f"LEDGER['QUEUES'][{name!r}] has RATE, CONCURRENCY or KEY and {shards} SHARDS: "
                "a queue with limits has one shard (see 'Flow limits' in the django-ledger docs)"
            )
        return limits

    @property
    def runtime_schedules(self) -> bool:
        """``LEDGER['RUNTIME_SCHEDULES']``: whether schedules stored in Redis fire."""
        return self._flag("RUNTIME_SCHEDULES")

    @property
    def schedules(self) -> Any:
        """``LEDGER['SCHEDULES']`` as given: ``schedules.config`` checks and types it."""
        return self.raw.get("SCHEDULES")

    @property
    def dispatch(self) -> dict[str, Any]:
        """``LEDGER['DISPATCH']`` over its defaults, as a plain dict."""
        return {**DISPATCH_DEFAULTS, **self._section("DISPATCH")}

    @property
    def dispatch_settings(self) -> DispatchSettings:
        """``LEDGER['DISPATCH']`` checked and typed."""
        return dispatch_settings_of(self.dispatch)


ledger_settings = LedgerSettings()


# -- connections ----------------------------------------------------------------------


def connection(spec: Any = None) -> Any:
    """Return the redis-py client for a connection spec (default: ``LEDGER['CONNECTION']``).

    A client built from a URL or cluster nodes gets ``LEDGER['TIMEOUTS']``.
    """
    spec = ledger_settings.connection if spec is None else spec
    return client_for(spec, ledger_settings.timeouts)


# -- entry points ---------------------------------------------------------------------


def get_ledger(queue: str = "default") -> AnyLedger:
    """Build the ledger of ``queue`` from the ``LEDGER`` setting.

    A queue with ``SHARDS`` above 1 is a ``ShardedLedger``. The first ledger a process
    builds for a queue checks the queue's stored layout (one ``GET``): a queue holding
    records in another number of shards raises ``LayoutMismatch`` rather than lose
    track of duplicates. With Redis away the check waits for the next call (a process
    still starts, and its first operation says ``LedgerUnavailable``).
    """
    config = ledger_settings.queue(queue)
    ledger = build_ledger(queue, config.shards)
    if config.limits.key is not None:
        # Admissions compute each request's key (a queue with limits has one shard).
        ledger.shards[0].limit_key = config.limits.key
    namespace, client = ledger.namespace, ledger.redis
    layout = (namespace, queue, config.shards)
    try:
        checked = _LAYOUTS_CHECKED.setdefault(client, set())
    except TypeError:  # a client that takes no weak reference: check every time
        checked = set()
    if layout in checked:
        if isinstance(ledger, ShardedLedger):  # it would read the layout again otherwise
            ledger.layout_checked_already()
    else:
        try:
            ledger.check_layout()
        except LedgerUnavailable:
            # Redis is away: a worker or a web process still starts, and checks the next
            # time it builds this queue's ledger (a ShardedLedger checks before its first
            # call of its own).
            return ledger
        checked.add(layout)
    # Limits hold on a queue of one shard (checked above): its one ledger stores them.
    _store_limits(ledger.shards[0], checked, config.limits, config.key_limits)
    return ledger


def _store_limits(
    ledger: Ledger, done: set[Any], limits: Limits, key_limits: tuple[tuple[str, Limits], ...]
) -> None:
    """Write a queue's configured limits into Redis, once a process (docs/limits.md).

    Limits an operator set (``ledger_limits``) stay until reset; a queue without limits
    in its settings writes nothing (its stored limits, if any, stay until reset). The
    keys' limits of their own (``KEY_LIMITS``) likewise: an operator's stay, and those
    the settings wrote and no longer declare go.
    """
    marker = (ledger.namespace, ledger.queue, limits, key_limits)
    if not limits or marker in done:
        return
    try:
        ledger.set_limits(limits, source="settings", force=False)
        if limits.key is not None:
            declared = dict(key_limits)
            for own in ledger.limits().key_limits:
                if own.source == "settings" and own.key not in declared:
                    ledger.set_key_limits(own.key, None, source="settings", force=False)
            for key, own_limits in key_limits:
                ledger.set_key_limits(key, own_limits, source="settings", force=False)
    except LedgerUnavailable:
        return  # written by the next get_ledger
    done.add(marker)


def build_ledger(queue: str, shards: int) -> AnyLedger:
    """Build ``queue``'s ledger from the ``LEDGER`` setting, in ``shards`` shards.

    No layout check: ``get_ledger`` is what callers want; ``ledger_reshard`` builds the
    queue's old layout with this.
    """
    config = ledger_settings.queue(queue)
    namespace = ledger_settings.namespace
    durability = ledger_settings.durability
    client = connection()
    options: dict[str, Any] = {
        "max_payload_bytes": config.max_payload_bytes,
        "max_records": config.max_records,
        "optimized": config.optimized,
        "max_attempts": config.max_attempts,
        "max_retained": config.max_retained,
        "retention": config.retention,
        "durability_replicas": durability.replicas,
        "durability_timeout_ms": durability.timeout_ms,
    }
    try:
        if shards > 1:
            return ShardedLedger(client, namespace, queue, shards, **options)
        return Ledger(client, namespace, queue, **options)
    except ValueError as exc:
        # The one left is a client that decodes responses (decode_responses=True).
        raise ImproperlyConfigured(
            f"LEDGER['CONNECTION'] {ledger_settings.connection!r}: {exc}"
        ) from exc


#: Per client: the (namespace, queue, shards) whose stored layout this process checked,
#: and the (namespace, queue, Limits) it wrote into Redis.
_LAYOUTS_CHECKED: weakref.WeakKeyDictionary[Any, set[Any]] = weakref.WeakKeyDictionary()


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
    from .core.dispatch import DispatchRegistry, MemoryDispatchRegistry

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
