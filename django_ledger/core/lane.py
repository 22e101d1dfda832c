"""A thread's own connection to a node for the ledger's script calls: the short road.

A call through redis-py's client checks a connection out of the pool, polls it for stale
data, packs every argument in Python, records metrics and checks the connection back
in: about 30 µs on this project's VM, more than the round trip itself. A ledger script
call takes a shorter road. Each thread keeps one connection of its own per node (a
``Lane``: made with the pool's own settings, outside the pool), packs the whole command
in one hiredis call and reads the reply on it.

A call the server never ran goes to redis-py's own path, which reconnects, retries and
follows redirections as the client is configured: one that could not be sent, and the
refusals a server gives before running anything (NOSCRIPT, MOVED, ASK, TRYAGAIN,
CLUSTERDOWN, LOADING, READONLY, MASTERDOWN). A connection error or a time-out after the
command went out (it may have run) goes there only if the client's retry policy retries
that error, as redis-py itself would; otherwise it is raised. Either way the lane's
connection is dropped and made again on the next call. A script's own error is raised
as redis-py would raise it. A connection that sat idle for a while is polled before
use, as the pool does, so a server's idle timeout is met by a new connection.

Lanes serve plain ``Connection``, ``SSLConnection`` and ``UnixDomainSocketConnection``
pools encoding UTF-8 (redis-py's default). Any other client keeps redis-py's path for
every call (``lane_for`` answers ``None``): Sentinel, client-side caching, maintenance
notifications turned on outright, a credential provider, ``single_connection_client``,
another encoding. A lane lives on its pool (and goes with it); each connection is made
from the pool's settings as they are then. A forked child makes its own connections.

A thread's first ``WARM_CALLS`` calls take redis-py's path: a thread that makes only a
few (one per request of a server that starts a thread per request, as ``runserver``
does) never opens a connection of its own, and only threads that keep calling (a
worker's, a bulk loop's) do. Under gevent or eventlet, whose greenlets come and go by
the thousand, lanes stay off.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import redis as redis_py
from redis.utils import HIREDIS_AVAILABLE

_pack: Callable[[tuple[Any, ...]], bytes] | None = None
if HIREDIS_AVAILABLE:  # the hiredis redis-py itself packs with; else its Python packer
    from hiredis import pack_command as _pack

__all__ = ["MISSED", "Lane", "lane_for"]

#: What ``Lane.call`` answers when redis-py's own path must make the call.
MISSED: Any = object()
#: Seconds a connection may sit idle before it is polled for a close by the server.
IDLE_POLL_S = 1.0
#: Calls a thread makes through redis-py's path before it gets a connection of its own.
WARM_CALLS = 16
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
#: Where a pool keeps its lane (an attribute: the lane is collected with its pool).
_ATTRIBUTE = "_django_ledger_lane"


class _Held(threading.local):
    connection: Any = None
    pid = 0
    used = 0.0
    calls = 0  # this thread's calls so far, counted up to WARM_CALLS


class Lane:
    """One pool's per-thread connections, outside the pool."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._held = _Held()

    def _connection(self) -> Any:
        held = self._held
        connection = held.connection
        now = time.monotonic()
        if connection is None or held.pid != os.getpid():
            pool = self._pool
            connection = held.connection = pool.connection_class(**pool.connection_kwargs)
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

    def call(self, command: tuple[Any, ...], retry: Any = None) -> Any:
        """Send ``command`` and return its reply, or ``MISSED`` for redis-py's path.

        ``retry``: the retry policy of the client the call stands for (a cluster's own);
        ``None``: the connection's (a plain client's).
        """
        held = self._held
        if held.calls < WARM_CALLS:  # a thread that may make only a few calls
            held.calls += 1
            return MISSED
        try:
            packed = [_pack(command)] if _pack is not None else None
        except TypeError:  # a type hiredis does not pack: redis-py's path says what
            return MISSED
        sent = False
        connection = None
        try:
            connection = self._connection()
            connection.send_packed_command(packed or connection.pack_command(*command))
            sent = True
            return connection.read_response()
        except _REFUSALS:
            return MISSED
        except redis_py.ResponseError:  # the script's own error: a whole reply, as redis-py's
            raise
        except (redis_py.ConnectionError, redis_py.TimeoutError, OSError) as exc:
            self.drop()
            if not sent or _retries(retry or getattr(connection, "retry", None), exc):
                return MISSED
            raise  # it may have run: only a client that retries would send it again
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


def _retries(policy: Any, error: BaseException) -> bool:
    """Whether redis-py's ``Retry`` ``policy`` would send a call again after ``error``."""
    if policy is None:
        return False
    count = policy.get_retries() if hasattr(policy, "get_retries") else policy._retries
    return bool(count > 0 and isinstance(error, tuple(getattr(policy, "_supported_errors", ()))))


def _green() -> bool:
    """Whether gevent or eventlet has patched threads (a "thread" is then a greenlet)."""
    gevent = sys.modules.get("gevent.monkey")
    if gevent is not None and gevent.is_module_patched("threading"):
        return True
    eventlet = sys.modules.get("eventlet.patcher")
    return bool(eventlet is not None and eventlet.is_monkey_patched("thread"))


def lane_for(client: Any) -> Lane | None:
    """Return the lane of a plain ``redis.Redis`` client's pool, ``None`` if it has none."""
    if not isinstance(client, redis_py.Redis) or getattr(client, "connection", None) is not None:
        return None  # not a plain client, or one pinned to a single connection
    if _green():
        return None
    pool = getattr(client, "connection_pool", None)
    kwargs = getattr(pool, "connection_kwargs", None)
    if getattr(pool, "connection_class", None) not in _PLAIN or not isinstance(kwargs, dict):
        return None
    if getattr(pool, "cache", None) is not None or kwargs.get("credential_provider"):
        return None
    # Maintenance notifications asked for outright (not redis-py 8's "auto" on RESP3):
    # the pool moves its connections itself, and it knows nothing of a lane's.
    notifications = getattr(pool, "maint_notifications_enabled", None)
    if callable(notifications) and notifications() is True:
        return None
    encoding = str(kwargs.get("encoding", "utf-8")).lower().replace("-", "").replace("_", "")
    if encoding != "utf8" or kwargs.get("encoding_errors", "strict") != "strict":
        return None
    lane = getattr(pool, _ATTRIBUTE, None)
    if lane is None:  # two threads may both make one: the last kept serves from then on
        lane = Lane(pool)
        setattr(pool, _ATTRIBUTE, lane)
    return lane
