"""One queue's keys and scripts on one client: the plumbing both paths of the ledger share.

``Runner.run`` calls a script's function with the queue's keys: ``FCALL`` on the
connection the calling thread borrowed for a scope (``lane.py``: a worker's main loop, a
bulk loop), else (and when that cannot answer) through redis-py's client, and when the
server lacks the library, the load and the call as one (``scripts.fcall``).
``translate_errors`` turns redis-py's errors into the ledger's, and ``server_time_ms``
reads the Redis server clock of the node that holds the queue. The fused path
(``fused.py``), the reference path (``reference.py``) and ``Ledger`` (the facade
choosing one) all build on it; it imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import redis as redis_py
from redis.crc import key_slot

from .errors import NotReplicated
from .lane import MISSED, current
from .layout import QUEUE_KEY_NAMES, QueueKeys
from .records import State
from .scripts import (
    READ_ONLY,
    SCRIPT_NAMES,
    SCRIPTS,
    Scripts,
    fcall,
    function_missing,
    loaded_reply,
    moved,
    node_of,
    queue_loaded,
    refresh_slots,
)
from .transport import Translate

__all__ = ["KEY_NAMES", "WRITE_SCRIPTS", "Runner"]

#: The suffixes of a queue's keys, in the order every script takes them in ``KEYS``.
KEY_NAMES = QUEUE_KEY_NAMES
#: The ledger's scripts that may write: with durability on, each is followed by ``WAIT``.
WRITE_SCRIPTS = frozenset(SCRIPT_NAMES) - READ_ONLY
#: Attempts of a replicated write whose slot moved (MOVED after a failover) before giving up.
_REDIRECTS = 3


class Runner:
    """Run one queue's scripts on a redis-py client (``Redis`` or ``RedisCluster``)."""

    def __init__(
        self,
        redis: Any,
        namespace: str,
        queue: str,
        label: str,
        *,
        durability_replicas: int = 0,
        durability_timeout_ms: int = 1000,
    ) -> None:
        self.redis = redis
        self.keys = QueueKeys.of(namespace, queue)
        self.scripts: Scripts = SCRIPTS
        self.label = label
        #: Test seam: milliseconds added to the Redis server clock inside every script.
        self.clock_skew_ms = 0
        #: Replicas that must acknowledge each write (``WAIT``); 0: none asked.
        self.durability_replicas = durability_replicas
        self.durability_timeout_ms = durability_timeout_ms
        #: The queue's name as messages give it (``namespace:queue``).
        self.queue_name = f"{namespace}:{queue}"
        #: The queue's cluster slot: a scope's call on a cluster goes to the node serving it.
        self._slot = key_slot(self.keys.records.encode())

    def __repr__(self) -> str:
        return self.label

    @property
    def flows_key(self) -> str:
        """The queue's workflows (``workflows.lua``): specs, dependants, waiting counts."""
        return self.keys.flows

    @property
    def terminal_keys(self) -> dict[State, str]:
        """The indexes of terminal records, scored by when they ended."""
        return {
            State.COMPLETED: self.keys.completed,
            State.FAILED: self.keys.failed,
            State.DEAD: self.keys.dead,
        }

    def run(self, script: Any, args: Sequence[Any], extra_keys: Sequence[str] = ()) -> Any:
        """Run one of this queue's scripts, with errors in the ledger's terms.

        One ``FCALL`` of the script's function; on a server that lacks the library, the
        load and the call as one (``scripts.fcall``). With durability on, a write
        script is followed by ``WAIT`` on the same connection (``replicated``).
        ``extra_keys`` follow the queue's (a script whose ``KEY_NAMES`` name more, all
        under its tag).
        """
        keys = (*self.keys, *extra_keys)
        command = ("FCALL", script.function, len(keys), *keys, self.clock_skew_ms, *args)
        with self.translate_errors():
            if self.durability_replicas and script.writes:
                return self._replicated_call(command)
            scope = current(self.redis)  # a scope this thread opened on the client
            if scope is not None:
                reply = scope.call("FCALL", command, self._slot)
                if reply is not MISSED:
                    return reply
            return fcall(self.redis, command)

    def write(self, *command: Any) -> Any:
        """Send one plain write command on this queue's keys, replicated like a script."""
        with self.translate_errors():
            if self.durability_replicas:
                return self.replicated(lambda pipe: pipe.execute_command(*command))
            return self.redis.execute_command(*command)

    def _replicated_call(self, command: Sequence[Any]) -> Any:
        try:
            return self.replicated(lambda pipe: pipe.execute_command(*command))
        except redis_py.ResponseError as exc:
            if not function_missing(exc):
                raise
        return self.replicated(lambda pipe: queue_loaded(pipe, command))

    def replicated(self, queue_command: Callable[[Any], Any]) -> Any:
        """Send one write and ``WAIT`` in one round trip, on one connection of the master.

        ``WAIT`` counts the replicas that acknowledged the writes of its own connection,
        so it must travel on the connection that carried the write: a pooled client may
        hand the next command another one, whose last write is older. Hence a pipeline
        of the two, on the queue's own master (on a cluster, the node serving the
        queue's slot). ``queue_command`` queues one command, or the four of
        ``scripts.queue_loaded`` (the library loaded and the call made as one). Return
        the write's reply; raise ``NotReplicated`` when fewer than
        ``durability_replicas`` replicas acknowledged it in time.
        """
        wanted, timeout_ms = self.durability_replicas, self.durability_timeout_ms
        for _ in range(_REDIRECTS):
            pipe = node_of(self.redis, self.keys.records).pipeline(transaction=False)
            queue_command(pipe)
            pipe.execute_command("WAIT", wanted, timeout_ms)
            try:
                *replies, acknowledged = pipe.execute(raise_on_error=False)
            except (redis_py.ConnectionError, redis_py.TimeoutError):
                refresh_slots(self.redis)  # the master may have failed over: ask again next time
                raise
            if moved(replies):  # the slot moved
                refresh_slots(self.redis)
                continue
            reply = replies[0] if len(replies) == 1 else loaded_reply(replies)
            if isinstance(reply, Exception):
                raise reply
            if isinstance(acknowledged, Exception):
                raise acknowledged
            if int(acknowledged) < wanted:
                raise NotReplicated(self.label, int(acknowledged), wanted, timeout_ms)
            return reply
        raise redis_py.exceptions.ClusterError(
            f"the slot of {self.label} kept moving ({_REDIRECTS} redirections)"
        )

    def placement(self) -> tuple[int | None, str]:
        """Return the queue's cluster slot (``None`` on one server) and its node's address.

        The address is ``host:port`` (a unix socket's path), as the client sees it: on a
        cluster, the master its slots table names for the queue's hash tag.
        """
        if isinstance(self.redis, redis_py.RedisCluster):
            node_for: Callable[[str], Any] = self.redis.get_node_from_key  # untyped in redis-py
            with self.translate_errors():
                return self._slot, str(node_for(self.keys.records).name)
        kwargs = getattr(getattr(self.redis, "connection_pool", None), "connection_kwargs", {})
        if kwargs.get("path"):
            return None, str(kwargs["path"])
        return None, f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"

    def address(self) -> str:
        """The queue's node as ``placement`` names it; ``"?"`` when even that cannot be told."""
        try:
            return self.placement()[1]
        except Exception:  # for messages only: a cluster with no slots table, say
            return "?"

    def translate_errors(self) -> Translate:
        return Translate(self)

    def server_time_ms(self) -> int:
        """Return the Redis server's clock (plus the test skew) in epoch milliseconds.

        Read by a script with the queue's keys, so on a cluster it is the clock of the
        queue's own master, the one every other script of this queue reads.
        """
        return int(self.run(self.scripts.now, [])[0])

    def now_and_raw(self, request_id: str) -> tuple[int, bytes | None]:
        """Read the server clock and one record's bytes in one round trip (one script)."""
        now, raw = self.run(self.scripts.now, [request_id])
        return int(now), raw
