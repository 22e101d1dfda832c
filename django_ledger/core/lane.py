"""A thread's own connection to a node for the ledger's script calls: the short road.

A call through redis-py's client checks a connection out of the pool, polls it for stale
data, packs every argument in Python, records metrics and checks the connection back
in: about 30 µs on this project's VM, more than the round trip itself. A ledger script
call takes a shorter road. Each thread keeps one connection of its own per node (a
``Lane``: made with the pool's own settings, outside the pool), packs the whole command
in one hiredis call and reads the reply on it.

Anything but a reply hands the call back to redis-py's own path, which reconnects,
retries and follows redirections as the client is configured: a connection error or a
timeout (the lane's connection is dropped and made again on the next call), and the
refusals a server gives before running anything (NOSCRIPT, MOVED, ASK, TRYAGAIN,
CLUSTERDOWN, LOADING, READONLY, MASTERDOWN). A script's own error is raised as redis-py
would raise it. A connection that sat idle for a while is polled before use, as the
pool does, so a server's idle timeout is met by a new connection, not a failed call.

Lanes serve plain ``Connection``, ``SSLConnection`` and ``UnixDomainSocketConnection``
pools encoding UTF-8 (redis-py's default); any other client (Sentinel, client-side
caching, another encoding) keeps redis-py's path for every call (``lane_for`` answers
``None``). A forked child makes its own connections.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import redis as redis_py

_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _pack
except ImportError:  # redis-py packs in Python: slower, the same bytes
    _pack = None

__all__ = ["MISSED", "Lane", "lane_for"]

#: What ``Lane.call`` answers when redis-py's own path must make the call.
MISSED: Any = object()
#: Seconds a connection may sit idle before it is polled for a close by the server.
IDLE_POLL_S = 1.0
#: Refusals given before anything runs: the call goes to redis-py's path, which knows them.
_REFUSALS = (
    redis_py.exceptions.NoScriptError,
    redis_py.exceptions.BusyLoadingError,
    redis_py.exceptions.ReadOnlyError,
    redis_py.exceptions.AskError,  # MovedError is an AskError
    redis_py.exceptions.TryAgainError,
    redis_py.exceptions.ClusterDownError,
    redis_py.exceptions.MasterDownError,
)
_PLAIN = (
    redis_py.Connection,
    redis_py.SSLConnection,
    redis_py.UnixDomainSocketConnection,
)
_lanes: weakref.WeakKeyDictionary[Any, Lane] = weakref.WeakKeyDictionary()
_lanes_lock = threading.Lock()


class _Held(threading.local):
    connection: Any = None
    pid = 0
    used = 0.0


class Lane:
    """One pool's per-thread connections, outside the pool."""

    def __init__(self, pool: Any) -> None:
        self._class = pool.connection_class
        self._kwargs = dict(pool.connection_kwargs)
        self._held = _Held()

    def _connection(self) -> Any:
        held = self._held
        connection = held.connection
        now = time.monotonic()
        if connection is None or held.pid != os.getpid():
            connection = held.connection = self._class(**self._kwargs)
            held.pid = os.getpid()
        elif now - held.used > IDLE_POLL_S and getattr(connection, "_sock", None) is not None:
            # Data waiting on an idle connection is a close (or junk): start afresh.
            try:
                stale = connection.can_read()
            except (redis_py.ConnectionError, OSError):  # the server closed it
                stale = True
            if stale:
                connection.disconnect()
        held.used = now
        return connection

    def call(self, command: tuple[Any, ...]) -> Any:
        """Send ``command`` and return its reply, or ``MISSED`` for redis-py's path."""
        try:
            packed = [_pack(command)] if _pack is not None else None
        except TypeError:  # a type hiredis does not pack: redis-py's path says what
            return MISSED
        try:
            connection = self._connection()
            connection.send_packed_command(packed or connection.pack_command(*command))
            return connection.read_response()
        except _REFUSALS:
            return MISSED
        except redis_py.ResponseError:  # the script's own error: a whole reply, as redis-py's
            raise
        except (redis_py.ConnectionError, redis_py.TimeoutError, OSError):
            self.drop()
            return MISSED
        except BaseException:
            # Interrupted with the reply unread: the connection cannot be trusted again.
            self.drop()
            raise

    def drop(self) -> None:
        """Close this thread's connection (if this process made it)."""
        held = self._held
        connection, held.connection = held.connection, None
        if connection is not None and held.pid == os.getpid():
            connection.disconnect()


def lane_for(client: Any) -> Lane | None:
    """Return the lane of a plain ``redis.Redis`` client's pool, ``None`` if it has none."""
    if not isinstance(client, redis_py.Redis):
        return None
    pool = getattr(client, "connection_pool", None)
    if pool is None or getattr(pool, "cache", None) is not None:
        return None
    kwargs = getattr(pool, "connection_kwargs", None)
    if getattr(pool, "connection_class", None) not in _PLAIN or not isinstance(kwargs, dict):
        return None
    encoding = str(kwargs.get("encoding", "utf-8")).lower().replace("-", "").replace("_", "")
    if encoding != "utf8" or kwargs.get("encoding_errors", "strict") != "strict":
        return None
    with _lanes_lock:
        lane = _lanes.get(pool)
        if lane is None:
            lane = _lanes[pool] = Lane(pool)
    return lane
