"""The one registry every caller runs the ledger's Lua through: ``FCALL``, loading on a miss.

The Lua is one function library (``library.py``: ``ledger_<hash>``, one function per
entry script). A call is one ``FCALL ledger_<hash>_<name> numkeys keys... args...``,
with nothing before it: a server that has the library answers at once. A server that
lacks it (a fresh server, ``FUNCTION FLUSH``, a restart without its data, a failover
to a replica that never had it) answers ``Function not found`` (Redis 7 and Valkey 8
alike), and the call is sent again as ``MULTI``, ``FUNCTION LOAD REPLACE <library>``,
the ``FCALL``, ``EXEC``, on one connection of the node that serves the call's keys (on
a cluster, their slot's primary): the load and the call run as one, so no flush can
come between them and reach the caller. Each node is loaded the first time a call
there misses; the other nodes of a cluster load theirs at their own first miss.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import redis as redis_py

from .library import (
    KEY_NAMES,
    READ_ONLY,
    SCRIPT_NAMES,
    LuaScript,
    key_line,
    library,
    located,
    script,
)

__all__ = [
    "KEY_NAMES",
    "READ_ONLY",
    "SCRIPTS",
    "SCRIPT_NAMES",
    "LuaScript",
    "Scripts",
    "call",
    "drop_old_libraries",
    "fcall",
    "function_missing",
    "key_line",
    "loaded_reply",
    "located",
    "moved",
    "node_of",
    "queue_loaded",
    "refresh_slots",
    "script",
]

#: Attempts of a loading call whose slot moved (MOVED after a failover) before giving up.
_REDIRECTS = 3
#: The name of a version of the ledger's library.
_LIBRARY_NAME = re.compile(r"ledger_[0-9a-f]{12}")


class Scripts:
    """Every entry script by name: ``SCRIPTS.claim``, ``SCRIPTS.settle_claim``, ..."""

    def __getattr__(self, name: str) -> LuaScript:
        try:
            return script(name)
        except ValueError as exc:
            raise AttributeError(str(exc)) from None


#: The one registry every caller runs its scripts from.
SCRIPTS = Scripts()


def function_missing(exc: BaseException) -> bool:
    """Whether ``exc`` is a server's answer that the called function is not loaded."""
    return isinstance(exc, redis_py.ResponseError) and str(exc).startswith("Function not found")


def queue_loaded(pipe: Any, command: Sequence[Any]) -> None:
    """Queue ``MULTI``, ``FUNCTION LOAD REPLACE <library>``, ``command``, ``EXEC`` on ``pipe``.

    ``pipe`` is a non-transaction pipeline of one node: the four go on one connection,
    and the server runs the load and the call as one.
    """
    pipe.execute_command("MULTI")
    pipe.execute_command("FUNCTION LOAD", "REPLACE", library().source)
    pipe.execute_command(*command)
    pipe.execute_command("EXEC")


def loaded_reply(replies: Sequence[Any]) -> Any:
    """Return the call's reply from ``queue_loaded``'s four replies; raise the first error.

    A refusal while queuing (MOVED, NOPERM for ``FUNCTION LOAD``, ...) comes before
    ``EXEC``'s own abort; an error inside the function is the last entry of ``EXEC``'s.
    """
    for reply in replies[:4]:
        if isinstance(reply, Exception):
            raise reply
    result = replies[3][-1]
    if isinstance(result, Exception):
        raise result
    return result


def moved(replies: Sequence[Any]) -> bool:
    """Whether a pipeline's replies say the keys' slot is served elsewhere (MOVED, ASK)."""
    return any(isinstance(reply, redis_py.exceptions.AskError) for reply in replies)


def node_of(redis: Any, key: Any) -> Any:
    """A plain client on the node that serves ``key``: ``redis`` itself unless a cluster."""
    if not isinstance(redis, redis_py.RedisCluster):
        return redis
    node_of_key: Callable[[Any], Any] = redis.get_node_from_key  # untyped in redis-py
    return redis.get_redis_connection(node_of_key(key))


def refresh_slots(redis: Any) -> None:
    """Ask a cluster for its slots again (best effort: the next call says what is wrong)."""
    manager = getattr(redis, "nodes_manager", None)
    if manager is not None:
        with contextlib.suppress(redis_py.RedisError, redis_py.exceptions.RedisClusterException):
            manager.initialize()


def fcall(redis: Any, command: Sequence[Any]) -> Any:
    """Send ``command`` (``FCALL name numkeys keys... args...``); on a miss, load and repeat.

    redis-py's client sends it (on a cluster, to the keys' slot); when the server lacks
    the function, ``queue_loaded`` runs the load and the call as one on the keys' node.
    """
    try:
        return redis.execute_command(*command)
    except redis_py.ResponseError as exc:
        if not function_missing(exc):
            raise
    if not int(command[2]):
        raise ValueError(f"{command[1]} is called with no keys: no node to load it on")
    for _ in range(_REDIRECTS):
        node = node_of(redis, command[3])
        if getattr(node, "connection", None) is not None:  # a client pinned to one connection
            return loaded_reply(_on_pinned(node, command))
        pipe = node.pipeline(transaction=False)
        queue_loaded(pipe, command)
        replies = pipe.execute(raise_on_error=False)
        if moved(replies):
            refresh_slots(redis)
            continue
        return loaded_reply(replies)
    raise redis_py.exceptions.ClusterError(
        f"the slot of {command[3]!r} kept moving ({_REDIRECTS} redirections)"
    )


class _Queue:
    """Collects what ``queue_loaded`` queues, for a client pinned to one connection."""

    def __init__(self) -> None:
        self.commands: list[tuple[Any, ...]] = []

    def execute_command(self, *args: Any) -> None:
        self.commands.append(args)


def _on_pinned(client: Any, command: Sequence[Any]) -> list[Any]:
    """``queue_loaded``'s four commands on the one connection of a pinned client.

    Its pipeline would take a second connection from the pool; this sends them on the
    client's own, holding it as the client does for each of its commands.
    """
    queued = _Queue()
    queue_loaded(queued, command)
    with client.single_connection_lock:
        connection = client.connection
        connection.send_packed_command(connection.pack_commands(queued.commands))
        replies: list[Any] = []
        for _ in queued.commands:
            try:
                replies.append(connection.read_response())
            except redis_py.ResponseError as exc:
                replies.append(exc)
    return replies


def call(redis: Any, lua: LuaScript, keys: Sequence[str], args: Sequence[Any]) -> Any:
    """Run ``lua`` on ``keys`` (``fcall``); an error inside it comes back ``located``.

    The ledger's own queue calls go through ``Runner.run``, which adds a queue's
    connection scope and durability.
    """
    try:
        return fcall(redis, ("FCALL", lua.function, len(keys), *keys, *args))
    except redis_py.ResponseError as exc:
        raise located(exc) from exc


def drop_old_libraries(redis: Any) -> list[str]:
    """Delete the other versions' libraries (``ledger_<hash>``) from every primary.

    Return their names, each once. Safe at any time: a process still running another
    version finds its function missing at its next call and loads its library again
    with that call (``fcall``), so nothing is refused; it only costs that one load.
    """
    ours = library().name
    nodes: list[Any] = [redis]
    if isinstance(redis, redis_py.RedisCluster):
        primaries: Callable[[], list[Any]] = redis.get_primaries  # untyped in redis-py
        nodes = [redis.get_redis_connection(node) for node in primaries()]
    dropped: set[str] = set()
    for node in nodes:
        for entry in node.execute_command("FUNCTION LIST", "LIBRARYNAME", "ledger_*"):
            name = _library_name(entry)
            if name == ours or not _LIBRARY_NAME.fullmatch(name):
                continue
            try:
                node.execute_command("FUNCTION DELETE", name)
            except redis_py.ResponseError as exc:
                if "not found" not in str(exc).lower():  # another worker dropped it first
                    raise
            dropped.add(name)
    return sorted(dropped)


def _library_name(entry: Any) -> str:
    """The name in one entry of ``FUNCTION LIST`` (a RESP2 list or a RESP3 map)."""
    fields = entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2], strict=True))
    name = fields.get(b"library_name", fields.get("library_name", ""))
    return name.decode() if isinstance(name, bytes) else str(name)
