"""Redis clients for the Django layer: one per process, connection spec and time-outs.

A client built here from a URL or cluster nodes gets ``LEDGER['TIMEOUTS']``, so a Redis
that stalls cannot hold a request for ever, and the ledger's own retry policy
(``client_retry``), so a call on a dead server fails at once whichever redis-py is
installed: redis-py's defaults change between releases (8.2 spaces a cluster client's
ten retries out by up to a second each). The ledger's callers own the waiting: the
worker's and the scheduler's loops, an enqueue's tries, the repair cycles. A cache alias
keeps django-redis's options.
A fork (gunicorn, multiprocessing) must not share its parent's sockets, so every
cache here is forgotten, without closing anything, in a child process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

from .core.errors import LedgerError, LedgerUnavailable
from .defaults import TIMEOUT_DEFAULTS, Timeouts, timeouts_of

__all__ = [
    "DEFAULT_TIMEOUTS",
    "URL_SCHEMES",
    "cached",
    "client_for",
    "client_retry",
    "cluster_nodes",
    "connection_kind",
    "registries",
    "reset_connections",
    "url_problem",
]

URL_SCHEMES = ("redis", "rediss", "unix")
DEFAULT_TIMEOUTS = timeouts_of(TIMEOUT_DEFAULTS)

#: How many times a cluster client the ledger builds sends a failed call again: once, at
#: once, after reading the slots table again (a master that moved, a connection the server
#: closed). A standalone client sends nothing again (redis-py's own choice for a client
#: without ``retry``, set here explicitly).
CLUSTER_RETRIES = 1

_T = TypeVar("_T")
_lock = threading.Lock()
_pid = os.getpid()
_clients: dict[tuple[Any, ...], Any] = {}
#: Dispatch registries built by ``conf.get_dispatch_registry``, per process like clients.
registries: dict[tuple[Any, ...], Any] = {}


def connection_kind(spec: Any) -> str:
    """Classify a connection spec: ``"url"``, ``"cluster"`` or ``"alias"``.

    Raise ``ImproperlyConfigured`` for anything else (the checks say it first).
    """
    if isinstance(spec, dict) and set(spec) == {"CLUSTER"}:
        return "cluster"
    if isinstance(spec, str) and spec:
        return "url" if "://" in spec else "alias"
    raise ImproperlyConfigured(
        "a ledger connection must be a django-redis cache alias, a redis://, rediss:// or "
        f"unix:// URL, or {{'CLUSTER': ['host:port', ...]}}, got {spec!r}"
    )


def cluster_nodes(spec: dict[str, Any]) -> list[tuple[str, int]]:
    """Parse ``{"CLUSTER": ["host:port", ...]}``; raise ``ImproperlyConfigured`` if malformed."""
    nodes = spec["CLUSTER"]
    if isinstance(nodes, str) or not isinstance(nodes, list | tuple) or not nodes:
        raise ImproperlyConfigured(
            f"CLUSTER must be a non-empty list of 'host:port' startup nodes, got {nodes!r}"
        )
    parsed = []
    for node in nodes:
        host, _, port = node.rpartition(":") if isinstance(node, str) else ("", "", "")
        if not host or not port.isdecimal() or not 0 < int(port) < 65536:
            raise ImproperlyConfigured(f"CLUSTER startup node {node!r} is not 'host:port'")
        parsed.append((host.strip("[]"), int(port)))
    return parsed


def url_problem(url: str) -> str | None:
    """Say why ``url`` is not a usable Redis URL, or ``None``."""
    from redis.connection import parse_url as parse  # untyped in redis-py

    parse_url: Callable[[str], dict[str, Any]] = parse
    scheme = url.partition("://")[0]
    if scheme not in URL_SCHEMES:
        return f"scheme {scheme!r} is not one of redis://, rediss:// or unix://"
    try:
        parse_url(url)
    except ValueError as exc:
        return str(exc)
    if scheme != "unix":
        # redis-py drops a path it cannot read as an int and quietly uses database 0.
        path = unquote(urlsplit(url).path).strip("/")
        if path and not (path.isascii() and path.isdigit()):
            return f"the database ({path!r}, the URL's path) must be a number such as /0"
    return None


def client_for(spec: Any, timeouts: Timeouts = DEFAULT_TIMEOUTS) -> Any:
    """Return the redis-py client for a connection spec.

    A cache alias goes through ``django_redis.get_redis_connection`` (django-redis
    keeps one pool per process, with the cache's own options); a URL or a cluster's
    startup nodes get one client, and so one pool, per process and ``timeouts``,
    reused. A URL's own query arguments (``?socket_timeout=``) win over ``timeouts``.
    """
    if spec.__class__ is str:
        # The common call, per operation: a URL whose client this process has built.
        client = _clients.get(("url", spec, timeouts))
        if client is not None and _pid == os.getpid():
            return client
    kind = connection_kind(spec)
    if kind == "cluster":
        nodes = cluster_nodes(spec)
        key = ("cluster", tuple(nodes), timeouts)
        return cached(_clients, key, lambda: _cluster(nodes, timeouts))
    if kind == "url":
        problem = url_problem(spec)
        if problem is not None:
            raise ImproperlyConfigured(f"ledger connection URL {spec!r}: {problem}")
        import redis

        return cached(
            _clients,
            ("url", spec, timeouts),
            lambda: redis.Redis.from_url(
                spec,
                socket_connect_timeout=timeouts.connect,
                socket_timeout=timeouts.socket,
                retry=client_retry(0),
            ),
        )
    return _alias_connection(spec)


def _alias_connection(alias: str) -> Any:
    from django.core.cache import InvalidCacheBackendError

    try:
        from django_redis import get_redis_connection

        return get_redis_connection(alias)
    except InvalidCacheBackendError as exc:
        raise ImproperlyConfigured(
            f"ledger connection {alias!r} is not a cache alias in CACHES ({exc})"
        ) from exc
    except NotImplementedError as exc:
        raise ImproperlyConfigured(
            f"ledger connection {alias!r} is a cache that is not django-redis "
            "(django_redis.cache.RedisCache)"
        ) from exc


def _cluster(nodes: list[tuple[str, int]], timeouts: Timeouts) -> Any:
    from redis import exceptions
    from redis.cluster import ClusterNode, RedisCluster

    node: Callable[[str, int], ClusterNode] = ClusterNode  # untyped in redis-py
    try:
        # Reads the cluster's slots from a startup node at once, so it can fail here.
        return RedisCluster(
            startup_nodes=[node(host, port) for host, port in nodes],
            socket_connect_timeout=timeouts.connect,
            socket_timeout=timeouts.socket,
            retry=client_retry(CLUSTER_RETRIES),
        )
    except (exceptions.RedisError, exceptions.RedisClusterException, OSError) as exc:
        where = ", ".join(f"{host}:{port}" for host, port in nodes)
        unreachable = (exceptions.ConnectionError, exceptions.TimeoutError, OSError)
        if isinstance(exc, unreachable) or isinstance(exc.__cause__, unreachable):
            raise LedgerUnavailable(f"Redis Cluster at {where} is unavailable: {exc}") from exc
        raise LedgerError(f"Redis Cluster at {where} refused the client: {exc}") from exc


def client_retry(retries: int) -> Any:
    """Return the redis-py ``Retry`` the ledger's clients use: ``retries`` sends, no wait."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return Retry(NoBackoff(), retries)


def cached(store: dict[Any, _T], key: Any, build: Callable[[], _T]) -> _T:
    global _pid
    with _lock:
        if os.getpid() != _pid:
            # A forked child (gunicorn, multiprocessing) must not share the parent's
            # sockets: forget, without closing, what the parent built.
            _clients.clear()
            registries.clear()
            _pid = os.getpid()
        if key not in store:
            store[key] = build()
        return store[key]


def reset_connections() -> None:
    """Forget cached clients and registries (tests that repoint the setting use this)."""
    with _lock:
        for client in _clients.values():
            close = getattr(client, "close", None)
            if callable(close):
                close()
        _clients.clear()
        registries.clear()
