"""Checks of a connection spec: a cache alias, a Redis URL or ``{'CLUSTER': [...]}``.

``LEDGER['CONNECTION']`` and ``LEDGER['DISPATCH']['CONNECTION']`` take the same specs, so
both are checked here (ids E010 to E014).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.translation import gettext

from .. import connections
from .base import error as _error
from .base import imported
from .base import safe as _safe

__all__ = ["check_connection"]


def check_connection(spec: Any, where: str) -> list[checks.CheckMessage]:
    """Check the connection spec found at ``where``."""
    try:
        kind = connections.connection_kind(spec)
    except ImproperlyConfigured:
        return [
            _error(
                10,
                gettext("Must be a cache alias, a Redis URL or {'CLUSTER': [...]}, got %(spec)r.")
                % {"spec": spec},
                gettext(
                    "For example 'default' (a django-redis cache), 'redis://127.0.0.1:6379/0', or "
                    "{'CLUSTER': ['10.0.0.1:7000', '10.0.0.2:7000']}."
                ),
                where,
            )
        ]
    if kind == "cluster":
        try:
            connections.cluster_nodes(spec)
        except ImproperlyConfigured as exc:
            return [
                _error(
                    14,
                    f"{str(exc)[0].upper()}{str(exc)[1:]}.",
                    gettext("Give {'CLUSTER': ['host:port', ...]}: one or more startup nodes."),
                    where,
                )
            ]
        return []
    if kind == "url":
        problem = connections.url_problem(spec)
        if problem is not None:
            return [
                _error(
                    13,
                    gettext("%(spec)s is not a usable Redis URL: %(problem)s.")
                    % {"spec": _safe(spec), "problem": problem},
                    gettext(
                        "Use redis://[user:password@]host:port/db, rediss://... (TLS) or "
                        "unix:///path/to/redis.sock."
                    ),
                    where,
                )
            ]
        return []
    return _check_alias(spec, where)


def _check_alias(alias: str, where: str) -> list[checks.CheckMessage]:
    caches = getattr(settings, "CACHES", {})
    if alias not in caches:
        return [
            _error(
                11,
                gettext("Names the cache %(alias)r, which CACHES does not define.")
                % {"alias": alias},
                gettext(
                    "Add a django-redis cache %(alias)r to CACHES, or give a redis:// URL instead "
                    "(CACHES defines: %(names)s)."
                )
                % {"alias": alias, "names": ", ".join(map(repr, caches)) or gettext("nothing")},
                where,
            )
        ]
    backend = caches[alias].get("BACKEND", "")
    if not _is_django_redis(backend):
        return [
            _error(
                12,
                gettext("Names the cache %(alias)r, whose backend %(backend)r is not django-redis.")
                % {"alias": alias, "backend": backend},
                gettext(
                    "Use 'BACKEND': 'django_redis.cache.RedisCache' for that cache, or give a "
                    "redis:// URL."
                ),
                where,
            )
        ]
    return []


def _is_django_redis(backend: str) -> bool:
    try:
        from django_redis.cache import RedisCache
    except ImportError:
        return False
    cls, _ = imported(backend)
    return isinstance(cls, type) and issubclass(cls, RedisCache)
