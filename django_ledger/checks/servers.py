"""With ``--deploy``: checks of Redis itself (version, eviction policy, persistence)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string
from django.utils.translation import gettext

from .. import conf, connections
from ..core.errors import LedgerError
from .base import error as _error
from .base import safe as _safe
from .settings import check_settings

__all__ = ["check_redis"]


def check_redis(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Ping every configured Redis: version, eviction policy and persistence."""
    if check_settings():
        return []  # the configuration checks have already said what is wrong
    targets = {"LEDGER['CONNECTION']": conf.ledger_settings.connection}
    dispatch = conf.ledger_settings.dispatch_settings
    backend = import_string(dispatch.backend)
    from ..core.dispatch import MemoryDispatchRegistry

    messages: list[checks.CheckMessage] = []
    if issubclass(backend, MemoryDispatchRegistry):
        messages.append(
            checks.Warning(
                gettext(
                    "The dispatch registry is MemoryDispatchRegistry: claim_dispatch is at most "
                    "once per process only, not across processes or hosts."
                ),
                hint=gettext(
                    "Use django_ledger.core.dispatch.RedisDispatchRegistry in production."
                ),
                obj="LEDGER['DISPATCH']['BACKEND']",
                id="django_ledger.W003",
            )
        )
    elif dispatch.connection is not None and dispatch.connection != targets["LEDGER['CONNECTION']"]:
        targets["LEDGER['DISPATCH']['CONNECTION']"] = dispatch.connection
    for where, spec in targets.items():
        messages += _inspect(spec, where)
    return messages + _check_data_loss()


#: How long ``check --deploy`` tells of a data loss the workers noticed.
DATA_LOSS_SHOWN_MS = 7 * 24 * 3600 * 1000


def _check_data_loss() -> list[checks.CheckMessage]:
    """W005: the workers found that Redis lost the ledger's data (in the last 7 days)."""
    import time

    import redis

    from ..core.worker.epoch import Epochs

    namespace = conf.ledger_settings.namespace
    try:
        epoch = Epochs(conf.connection(), namespace).read()
    except (redis.RedisError, OSError, ImproperlyConfigured, LedgerError):
        return []  # E050 says Redis is unreachable
    loss = None if epoch is None else epoch.after_loss
    if loss is None or time.time() * 1000 - loss.noticed_at > DATA_LOSS_SHOWN_MS:
        return []
    noticed = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(loss.noticed_at / 1000))
    return [
        checks.Warning(
            gettext(
                "Redis lost the ledger's data (namespace %(namespace)r): worker %(noticed_by)s "
                "noticed it at %(noticed)s. Records, results and heartbeats written before "
                "were gone; fences went on above every earlier one."
            )
            % {"namespace": namespace, "noticed_by": loss.noticed_by, "noticed": noticed},
            hint=gettext(
                "Make Redis persist (appendonly yes; see W002), and re-send the tasks that "
                "must still run (enqueue_once with their ids, the outbox relay). This warning "
                "shows for 7 days after the loss was noticed."
            ),
            obj="LEDGER['CONNECTION']",
            id="django_ledger.W005",
        )
    ]


def _inspect(spec: Any, where: str) -> list[checks.CheckMessage]:
    import redis

    try:
        messages: list[checks.CheckMessage] = []
        # Only the ledger's writes WAIT for replicas (LEDGER['DURABILITY']).
        wanted = conf.ledger_settings.durability.replicas if where == "LEDGER['CONNECTION']" else 0
        for name, client in _nodes(spec):
            messages += _inspect_node(client, name, where)
            messages += _check_replicas(client, name, where, wanted)
        return messages
    except (redis.RedisError, OSError, ImproperlyConfigured, LedgerError) as exc:
        return [
            _error(
                50,
                gettext("Redis at %(spec)s is unreachable: %(exc)s.")
                % {"spec": _safe(spec), "exc": str(exc).rstrip(".")},
                gettext(
                    "Start Redis or fix the connection; the ledger cannot admit or claim without "
                    "it."
                ),
                where,
            )
        ]


def _nodes(spec: Any) -> Iterator[tuple[str, Any]]:
    """Yield (name, standalone client) for each server behind a connection spec."""
    import redis
    from redis.cluster import RedisCluster

    if connections.connection_kind(spec) == "url":
        # A client of its own with timeouts, so an unreachable host cannot hang `check`.
        client = redis.Redis.from_url(spec, socket_connect_timeout=5, socket_timeout=5)
        try:
            yield _safe(spec), client
        finally:
            client.close()
        return
    client = conf.connection(spec)
    if isinstance(client, RedisCluster):
        get_nodes: Callable[[], list[Any]] = client.get_nodes  # untyped in redis-py
        for node in get_nodes():
            yield node.name, client.get_redis_connection(node)
    else:
        yield _safe(spec), client


def _check_replicas(client: Any, name: str, where: str, wanted: int) -> list[checks.CheckMessage]:
    if not wanted:
        return []
    replication = client.info("replication")
    have = int(replication.get("connected_slaves", 0))
    if replication.get("role") != "master" or have >= wanted:
        return []
    return [
        checks.Warning(
            gettext(
                "Redis at %(name)s has %(have)s connected replica(s) and LEDGER['DURABILITY'] "
                "asks %(wanted)s to acknowledge every write: each write on it would wait the "
                "whole TIMEOUT and raise NotReplicated."
            )
            % {"name": name, "have": have, "wanted": wanted},
            hint=gettext("Add replicas to this master, or lower LEDGER['DURABILITY']['REPLICAS']."),
            obj="LEDGER['DURABILITY']['REPLICAS']",
            id="django_ledger.W004",
        )
    ]


def _server_name(server: dict[str, Any]) -> tuple[str, str]:
    """What the server says it is, from ``INFO server``: ``("Valkey", "8.1.8")`` or
    ``("Redis", "7.0.15")``.

    Valkey reports a ``redis_version`` too (the Redis version it is compatible with), so
    its own ``valkey_version`` is read first.
    """
    if "valkey_version" in server:
        return "Valkey", str(server["valkey_version"])
    return "Redis", str(server.get("redis_version", "?"))


def _inspect_node(client: Any, name: str, where: str) -> list[checks.CheckMessage]:
    import redis

    server = client.info("server")
    memory = client.info("memory")
    persistence = client.info("persistence")
    product, version = _server_name(server)
    messages: list[checks.CheckMessage] = [
        checks.Info(
            gettext("%(server)s %(version)s answers at %(name)s (%(where)s).")
            % {"server": product, "version": version, "name": name, "where": where},
            obj=where,
            id="django_ledger.I001",
        )
    ]
    policy = memory.get("maxmemory_policy", "noeviction")
    if policy != "noeviction":
        messages.append(
            checks.Warning(
                gettext(
                    "Redis at %(name)s evicts keys under memory pressure (maxmemory-policy "
                    "%(policy)s): it would silently drop ledger records."
                )
                % {"name": name, "policy": policy},
                hint=gettext(
                    "Set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and "
                    "in redis.conf); a full Redis then refuses writes instead of losing records."
                ),
                obj=where,
                id="django_ledger.W001",
            )
        )
    if int(persistence.get("aof_enabled", 0)):
        return messages
    try:
        save = client.config_get("save").get("save", "")
    except redis.ResponseError:
        messages.append(
            checks.Info(
                gettext(
                    "Redis at %(name)s refuses CONFIG GET, so RDB snapshots could not be verified; "
                    "AOF is off."
                )
                % {"name": name},
                hint=gettext("Make sure the server persists (appendonly yes is recommended)."),
                obj=where,
                id="django_ledger.I002",
            )
        )
        return messages
    if not str(save).strip():
        messages.append(
            checks.Warning(
                gettext(
                    "Redis at %(name)s persists nothing (appendonly no, no RDB save points): a "
                    "restart loses every record."
                )
                % {"name": name},
                hint=gettext("Set appendonly yes (appendfsync everysec or always) in redis.conf."),
                obj=where,
                id="django_ledger.W002",
            )
        )
    return messages
