"""Function calls on a connection borrowed from the pool for a scope: the short road.

A call through redis-py's client checks a connection out of the pool and back in,
packs every argument in Python and wraps the call in metrics and retries: about 65 µs
of client CPU on this project's VM, more than the round trip itself. A thread that
makes many calls in a row (a worker's main loop, a bulk loop) opens a scope instead::

    with borrowed(client):
        ...  # every ledger function call of this thread on ``client`` goes the short road

The scope borrows one connection with ``pool.get_connection()`` at its first call (on
a cluster, one per node, each at its first call there) and gives it back with
``pool.release()`` when it ends. Inside it, each ``FCALL`` is checked as the pool
checks a connection it hands out (``can_read``: data waiting means the server closed
it; ``should_reconnect``: a maintenance notification moved it), packed in one hiredis
call where hiredis is installed, and sent and read inside the connection's own
``retry.call_with_retry``, whose failure handler disconnects as redis-py's does: retry
counts, backoff and ``set_retry`` are the client's. The client's response callback for
``FCALL`` and redis-py's operation metrics see every call.

The connection stays the pool's: it counts against ``max_connections`` (a
``BlockingConnectionPool`` waits for it like any other), ``disconnect()`` and
``close()`` close it, a forked child never uses it (the scope answers ``MISSED`` there),
and it is back in the pool when the scope ends. A refusal given before anything ran
(``Function not found``, MOVED, ASK, TRYAGAIN, CLUSTERDOWN, LOADING, READONLY,
MASTERDOWN) answers ``MISSED``: the caller takes redis-py's path, which knows them (and
``scripts.fcall``, which loads the library where it is missing). Outside a scope (a
request thread, the admin, the API) every call is redis-py's own. Clients with
client-side caching or pinned to one connection (``single_connection_client``) get
no scope.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis as redis_py
from redis.observability.providers import get_observability_instance
from redis.observability.recorder import record_error_count, record_operation_duration
from redis.utils import HIREDIS_AVAILABLE

from .scripts import function_missing

_pack: Callable[[tuple[Any, ...]], bytes] | None = None
if HIREDIS_AVAILABLE:  # the hiredis redis-py itself parses with; else redis-py's packer
    from hiredis import pack_command as _pack

__all__ = ["MISSED", "borrowed", "current"]

#: What a scope's ``call`` answers when redis-py's own path must make the call.
MISSED: Any = object()
#: Refusals given before anything runs: the call goes to redis-py's path, which knows them.
_REFUSALS = (
    redis_py.exceptions.BusyLoadingError,
    redis_py.exceptions.ReadOnlyError,
    redis_py.exceptions.AskError,  # MovedError is an AskError
    redis_py.exceptions.TryAgainError,
    redis_py.exceptions.ClusterDownError,
    redis_py.exceptions.MasterDownError,
)
_LOST = (redis_py.ConnectionError, redis_py.TimeoutError, OSError)


class _Forks:
    """How many forks made this process (0 in the first): a child's scopes answer ``MISSED``."""

    count = 0


def _forked() -> None:
    _Forks.count += 1


os.register_at_fork(after_in_child=_forked)


class _Open(threading.local):
    """This thread's open scopes, by ``id`` of their client (each holds its client)."""

    def __init__(self) -> None:
        self.scopes: dict[int, _Scope | _ClusterScope] = {}


_OPEN = _Open()


@contextlib.contextmanager
def borrowed(*clients: Any) -> Iterator[None]:
    """Make this thread's script calls on ``clients`` on connections borrowed for the block.

    A client already in an open scope of this thread (an outer ``borrowed``) keeps it;
    a client that cannot have one keeps redis-py's path. Whatever was borrowed goes
    back to its pool when the block ends, however it ends.
    """
    scopes = _OPEN.scopes
    mine: list[tuple[int, _Scope | _ClusterScope]] = []
    for client in clients:
        key = id(client)
        if key in scopes:
            continue
        scope = _scope_for(client)
        if scope is not None:
            scopes[key] = scope
            mine.append((key, scope))
    try:
        yield
    finally:
        for key, scope in mine:
            scopes.pop(key, None)
            scope.close()


def current(client: Any) -> _Scope | _ClusterScope | None:
    """The scope this thread has open on ``client``, ``None`` outside one."""
    scopes = _OPEN.scopes
    return scopes.get(id(client)) if scopes else None


def _scope_for(client: Any) -> _Scope | _ClusterScope | None:
    if isinstance(client, redis_py.RedisCluster):
        return _ClusterScope(client)
    if not isinstance(client, redis_py.Redis) or getattr(client, "connection", None) is not None:
        return None  # not a redis-py client, or one pinned to a single connection
    if client.get_cache() is not None:
        return None  # client-side caching: its connections are redis-py's proxies
    return _Scope(client)


def _hiredis_packs(client: Any) -> bool:
    """Whether hiredis packs as the client's encoder would (UTF-8, strict: the default)."""
    encoder = client.get_encoder()
    encoding = str(encoder.encoding).lower().replace("-", "").replace("_", "")
    return _pack is not None and encoding == "utf8" and encoder.encoding_errors == "strict"


def _ready(pool: Any, connection: Any) -> None:
    """Check ``connection`` before a send as ``pool.get_connection()`` checks one it hands out.

    Called when ``should_reconnect()`` or ``can_read()`` said so (or failed): the rest
    of the pool's checks, and a new connection when they fail.
    """
    if connection.should_reconnect():  # a maintenance notification moved it
        connection.disconnect()
    try:
        if connection.can_read() and pool.cache is None and not pool.maint_notifications_enabled():
            raise redis_py.ConnectionError("Connection has data")
    except _LOST:  # data waiting is a close by the server (or junk): start afresh
        connection.disconnect()
        connection.connect()
        if connection.can_read() and pool.cache is None and not pool.maint_notifications_enabled():
            raise redis_py.ConnectionError("Connection not ready") from None


def _exchange(connection: Any, packed: bytes | None, command: tuple[Any, ...]) -> Any:
    if packed is not None:
        connection.send_packed_command((packed,))
    else:
        connection.send_command(*command)
    return connection.read_response()


def _record(connection: Any, name: str, start: float, **extra: Any) -> None:
    """Record the operation's duration as redis-py does (nothing unless observability is on)."""
    if get_observability_instance().get_provider_manager() is None:
        return  # what redis-py's recorder finds too, at a tenth of its cost
    record_operation_duration(
        command_name=name,
        duration_seconds=time.monotonic() - start,
        server_address=getattr(connection, "host", None),
        server_port=getattr(connection, "port", None),
        db_namespace=str(getattr(connection, "db", 0)),
        **extra,
    )


def _record_error(connection: Any, error: Exception, attempts: int) -> None:
    record_error_count(
        server_address=getattr(connection, "host", None),
        server_port=getattr(connection, "port", None),
        network_peer_address=getattr(connection, "host", None),
        network_peer_port=getattr(connection, "port", None),
        error_type=error,
        retry_attempts=attempts,
        is_internal=False,
    )


class _Scope:
    """One thread's borrowed connection of one plain client's pool."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.pool = client.connection_pool
        self.forks = _Forks.count
        self.connection: Any = None
        self.hiredis = _hiredis_packs(client)
        # The call in flight: its command's name, when it began, its failed attempts.
        self.name, self.start, self.attempts = "", 0.0, 0

    def call(self, name: str, command: tuple[Any, ...], slot: int = 0) -> Any:
        """Send ``command`` (its name first) and return its reply, or ``MISSED``."""
        if _Forks.count != self.forks:
            return MISSED  # a forked child: the connection is the parent's
        try:
            packed = _pack(command) if self.hiredis else None  # type: ignore[misc]
        except TypeError:  # a type hiredis does not pack: redis-py's path says what
            return MISSED
        connection = self.connection
        if connection is None:  # checked by the pool as it hands it out
            connection = self.connection = self.pool.get_connection()
        else:
            try:
                suspect = connection.should_reconnect() or connection.can_read()
            except _LOST:
                suspect = True
            if suspect:
                _ready(self.pool, connection)
        self.name, self.start, self.attempts = name, time.monotonic(), 0
        try:
            response = connection.retry.call_with_retry(
                lambda: _exchange(connection, packed, command),
                self._failed,
                with_failure_count=True,
            )
        except _REFUSALS:
            self.close()  # redis-py's path takes it from the pool: no second connection
            return MISSED
        except Exception as exc:
            if function_missing(exc):  # the library is not loaded there: fcall loads it
                self.close()
                return MISSED
            _record_error(connection, exc, self.attempts)
            raise
        if get_observability_instance().get_provider_manager() is not None:
            _record(connection, name, self.start)
        callback = self.client.response_callbacks.get(name)
        return response if callback is None else callback(response)

    def _failed(self, error: Exception, count: int) -> None:
        """A failed attempt, as redis-py's ``_close_connection``: recorded, disconnected."""
        connection = self.connection
        self.attempts = count
        if count <= connection.retry.get_retries():
            _record(connection, self.name, self.start, error=error, retry_attempts=count)
        connection.disconnect()

    def close(self) -> None:
        connection, self.connection = self.connection, None
        if connection is not None and _Forks.count == self.forks:
            self.pool.release(connection)


class _ClusterScope:
    """One thread's borrowed connections of a cluster client: one per node, as needed.

    Each call is one attempt on the node the client's slots table names, as one
    attempt of ``RedisCluster`` is. A connection error or time-out disconnects it and
    asks the cluster for its slots again, as redis-py does; then the call goes to
    redis-py's path if the cluster's retry policy retries, else it is raised.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.forks = _Forks.count
        #: node name -> (the node's client, its borrowed connection)
        self.held: dict[str, tuple[Any, Any]] = {}
        self.hiredis = _hiredis_packs(client)

    def call(self, name: str, command: tuple[Any, ...], slot: int = 0) -> Any:
        """Send ``command`` to the node serving ``slot``; its reply, or ``MISSED``."""
        if _Forks.count != self.forks:
            return MISSED
        cluster = self.client
        try:
            packed = _pack(command) if self.hiredis else None  # type: ignore[misc]
            node = cluster.nodes_manager.get_node_from_slot(slot)
            node_client = cluster.get_redis_connection(node)
        except (TypeError, redis_py.RedisError, redis_py.exceptions.RedisClusterException):
            return MISSED  # redis-py's path says what is wrong
        held = self.held.get(node.name)
        if held is not None and held[0] is not node_client:  # the node's client was replaced
            self._give_back(node.name)
            held = None
        start = time.monotonic()
        connection = None
        try:
            if held is None:
                connection = node_client.connection_pool.get_connection()
                self.held[node.name] = (node_client, connection)
            else:
                connection = held[1]
                _ready(node_client.connection_pool, connection)
            response = _exchange(connection, packed, command)
        except _REFUSALS:
            self._give_back(node.name)  # redis-py's path takes it from the node's pool
            return MISSED
        except redis_py.ResponseError as exc:
            if not function_missing(exc):
                raise
            self._give_back(node.name)  # the library is not loaded there: fcall loads it
            return MISSED
        except redis_py.exceptions.MaxConnectionsError:
            raise  # the pool is full here: not the node's failure
        except (redis_py.ConnectionError, redis_py.TimeoutError) as exc:
            if connection is not None:
                connection.disconnect()
            with contextlib.suppress(
                redis_py.RedisError, redis_py.exceptions.RedisClusterException
            ):
                cluster.nodes_manager.initialize()  # the node may have failed over
            if cluster.retry.get_retries() > 0:
                return MISSED
            _record_error(connection, exc, 0)
            raise
        _record(connection, name, start)
        callback = node_client.response_callbacks.get(name)
        if callback is not None:
            response = callback(response)
        callback = cluster.cluster_response_callbacks.get(name)
        return response if callback is None else callback(response)

    def _give_back(self, name: str) -> None:
        node_client, connection = self.held.pop(name)
        if _Forks.count == self.forks:
            node_client.connection_pool.release(connection)

    def close(self) -> None:
        for name in list(self.held):
            self._give_back(name)
