"""Where an outbox row is meant to go: the namespace and the Redis of the settings that wrote it.

Two deployments (settings modules) may share one database and not their Redis: each
writes its rows with its own target, and a relay delivers only its own target's rows
(and the rows written before targets existed, which carry none). The target is read
from the settings, never from Redis, so staging needs no round trip and works while
Redis is away: ``"<NAMESPACE> <where>"``, ``where`` being the connection's server as
configured, without credentials (``host:port/db``, ``unix:<path>/db``, ``cluster:`` and
its startup nodes; a cache alias is read through its ``LOCATION``), or a digest of it when
long. So processes that share an outbox must name their Redis alike.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from django.conf import settings

from ..conf import ledger_settings
from ..connections import cluster_nodes, connection_kind

__all__ = ["LEGACY", "MAX_TARGET", "outbox_target"]

#: The target of rows written before rows had one: any relay delivers them.
LEGACY = ""
#: The column's length; a longer target is kept as a digest.
MAX_TARGET = 255

_known: dict[tuple[str, str, str], str] = {}


def outbox_target() -> str:
    """This process's target: the ``LEDGER`` namespace and connection, as configured."""
    namespace = ledger_settings.namespace
    spec = ledger_settings.connection
    location = _cache_location(spec) if isinstance(spec, str) and "://" not in spec else None
    key = (namespace, repr(spec), repr(location))
    found = _known.get(key)
    if found is None:
        found = f"{namespace} {_where(spec, location)}"
        if len(found) > MAX_TARGET:
            found = f"{namespace[:100]} sha256:{hashlib.sha256(found.encode()).hexdigest()}"
        if len(_known) > 64:  # settings replaced over and over (tests): stay small
            _known.clear()
        _known[key] = found
    return found


def _cache_location(alias: str) -> Any:
    caches = getattr(settings, "CACHES", None) or {}
    cache = caches.get(alias) if isinstance(caches, dict) else None
    return cache.get("LOCATION") if isinstance(cache, dict) else None


def _where(spec: Any, location: Any) -> str:
    """The server ``spec`` names, without credentials."""
    try:
        kind = connection_kind(spec)
    except Exception:  # the checks refuse it; an enqueue fails on it anyway
        return "?"
    if kind == "cluster":
        return "cluster:" + ",".join(sorted(f"{host}:{port}" for host, port in cluster_nodes(spec)))
    if kind == "alias":
        if isinstance(location, list | tuple) and location:
            location = location[0]  # django-redis writes to the first
        if not isinstance(location, str) or not location:
            return f"cache:{spec}"
        spec = location.split(",")[0].strip()  # django-redis splits a comma-separated one
        if "://" not in spec:
            return f"cache:{spec}"
    return _server(spec)


def _server(url: str) -> str:
    from redis.connection import parse_url as parse  # untyped in redis-py

    parse_url: Callable[[str], dict[str, Any]] = parse
    try:
        parsed: dict[str, Any] = parse_url(url)
    except ValueError:
        return "url:sha256:" + hashlib.sha256(url.encode()).hexdigest()  # no credentials shown
    db = parsed.get("db") or 0
    if "path" in parsed:
        return f"unix:{parsed['path']}/{db}"
    return f"{str(parsed.get('host') or 'localhost').lower()}:{parsed.get('port') or 6379}/{db}"
