"""The ``LEDGER`` setting: defaults in one place, read on every access.

This module and the rest of the Django layer are the only places that read
``django.conf.settings``; the core takes plain values.
"""

from __future__ import annotations

import os
import socket
import threading
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from .ledger import Ledger

if TYPE_CHECKING:
    from .dispatch import DispatchRegistry

__all__ = [
    "DEFAULTS",
    "DISPATCH_DEFAULTS",
    "QueueSettings",
    "connection",
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
DISPATCH_DEFAULTS: dict[str, Any] = {
    "BACKEND": "django_ledger.dispatch.RedisDispatchRegistry",
    "CONNECTION": None,
    "NAMESPACE": "kaal",
    "TTL": 7 * 24 * 60 * 60,
    "NODE_ID": None,
}
TOP_DEFAULTS: dict[str, Any] = {
    "CONNECTION": "default",
    "NAMESPACE": "ledger",
    "QUEUES": {"default": {}},
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


class LedgerSettings:
    """Typed access to ``settings.LEDGER``, read afresh on every access."""

    @property
    def raw(self) -> dict[str, Any]:
        value = getattr(django_settings, "LEDGER", {})
        if not isinstance(value, dict):
            raise ImproperlyConfigured("the LEDGER setting must be a dict")
        return value

    @property
    def connection(self) -> Any:
        return self.raw.get("CONNECTION", TOP_DEFAULTS["CONNECTION"])

    @property
    def namespace(self) -> str:
        return str(self.raw.get("NAMESPACE", TOP_DEFAULTS["NAMESPACE"]))

    @property
    def defaults(self) -> dict[str, Any]:
        return {**DEFAULTS, **(self.raw.get("DEFAULTS") or {})}

    @property
    def queues(self) -> dict[str, dict[str, Any]]:
        queues = self.raw.get("QUEUES", TOP_DEFAULTS["QUEUES"])
        return {name: dict(overrides or {}) for name, overrides in queues.items()}

    @property
    def queue_names(self) -> list[str]:
        return list(self.queues)

    def queue(self, name: str) -> QueueSettings:
        queues = self.queues
        if name not in queues:
            known = ", ".join(sorted(queues)) or "none"
            raise ImproperlyConfigured(
                f"unknown ledger queue {name!r}; LEDGER['QUEUES'] configures: {known}"
            )
        merged = {**self.defaults, **queues[name]}
        return QueueSettings(
            name=name,
            max_payload_bytes=merged["MAX_PAYLOAD_BYTES"],
            max_records=merged["MAX_RECORDS"],
            optimized=merged["OPTIMIZED"],
            max_attempts=merged["MAX_ATTEMPTS"],
            retention=_as_timedelta(merged["RETENTION"]),
            lease=_as_timedelta(merged["LEASE"]),
        )

    @property
    def dispatch(self) -> dict[str, Any]:
        return {**DISPATCH_DEFAULTS, **(self.raw.get("DISPATCH") or {})}


ledger_settings = LedgerSettings()


def _as_timedelta(value: Any) -> timedelta:
    if isinstance(value, timedelta):
        return value
    return timedelta(seconds=value)


_pools: dict[str, Any] = {}
_pools_lock = threading.Lock()


def connection(spec: Any = None) -> Any:
    """Return the redis-py client for a connection spec (default: ``LEDGER['CONNECTION']``).

    A cache alias goes through ``django_redis.get_redis_connection``; a URL or a
    cluster's startup nodes get one client (and one pool) per process, reused.
    """
    spec = ledger_settings.connection if spec is None else spec
    if isinstance(spec, dict) and "CLUSTER" in spec:
        nodes = list(spec["CLUSTER"])
        return _cached("cluster:" + ",".join(nodes), lambda: _cluster(nodes))
    if not isinstance(spec, str) or not spec:
        raise ImproperlyConfigured(
            "LEDGER['CONNECTION'] must be a cache alias, a redis:// rediss:// or unix:// URL, "
            f"or {{'CLUSTER': [...]}}, got {spec!r}"
        )
    if spec.startswith(("redis://", "rediss://", "unix://")):
        import redis

        return _cached(spec, lambda: redis.Redis.from_url(spec))
    from django_redis import get_redis_connection

    return get_redis_connection(spec)


def _cluster(nodes: list[str]) -> Any:
    from redis.cluster import ClusterNode, RedisCluster

    startup = []
    for node in nodes:
        host, _, port = node.rpartition(":")
        startup.append(ClusterNode(host, int(port)))
    return RedisCluster(startup_nodes=startup)


def _cached(key: str, build: Any) -> Any:
    # The pool is per process: a fork (gunicorn, multiprocessing) must not share sockets.
    key = f"{os.getpid()}:{key}"
    with _pools_lock:
        if key not in _pools:
            _pools[key] = build()
        return _pools[key]


def reset_connections() -> None:
    """Forget cached clients (tests that point the setting at another Redis use this)."""
    with _pools_lock:
        for client in _pools.values():
            close = getattr(client, "close", None)
            if callable(close):
                close()
        _pools.clear()


def get_ledger(queue: str = "default") -> Ledger:
    """Build the ledger of ``queue`` from the ``LEDGER`` setting."""
    config = ledger_settings.queue(queue)
    return Ledger(
        connection(),
        ledger_settings.namespace,
        queue,
        max_payload_bytes=config.max_payload_bytes,
        max_records=config.max_records,
        optimized=config.optimized,
        max_attempts=config.max_attempts,
        retention=config.retention,
    )


def default_node_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def get_dispatch_registry(**overrides: Any) -> DispatchRegistry:
    """Build the dispatch registry from ``LEDGER['DISPATCH']``."""
    config = {**ledger_settings.dispatch, **{key.upper(): value for key, value in overrides.items()}}
    path = config["BACKEND"]
    try:
        backend = import_string(path)
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"LEDGER['DISPATCH']['BACKEND'] = {path!r} does not import: {exc}"
        ) from exc
    from .dispatch import MemoryDispatchRegistry

    if isinstance(backend, type) and issubclass(backend, MemoryDispatchRegistry):
        return backend(ttl=config["TTL"])
    client = connection(config["CONNECTION"])
    return backend(client, namespace=config["NAMESPACE"], ttl=config["TTL"])


def dispatch_node_id() -> str:
    """Return ``LEDGER['DISPATCH']['NODE_ID']``, or host name and process id."""
    return str(ledger_settings.dispatch["NODE_ID"] or default_node_id())
