"""The scheduler's shared state in Redis: one hash per namespace, ``{namespace}:schedules``.

Fields, for each schedule key ``K`` (keys hold no whitespace, so a space separates):

- ``through K``: the second through which ``K``'s fires are decided (epoch seconds);
- ``pending K E``: fire ``E`` was decided for admission and is not known to be done
  (JSON ``{"node": ..., "deadline": ms}``: who decided it, and until when it is theirs
  to finish before any other node takes it over);
- ``paused K``: an operator paused ``K`` (JSON ``{"by": ..., "at": ms}``).

Each node also publishes what it runs, at each tick, under keys of its own with a TTL
(``running``: ``publish`` and ``running`` here).

A decision moves ``through`` and adds its pending fires in one script call, a
compare-and-set on the ``through`` the node read (``lua/scripts/schedule_commit.lua``); the
other writes are single commands. The server clock is read with ``TIME`` in a script on
the state's key (``lua/scripts/schedule_snapshot.lua``), so on a Redis Cluster it is the clock of
the node that holds the state.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..scripts import LuaScript, call, script
from ..transport import Translate, text_of
from .running import (
    Running,
    decode_running,
    encode_running,
    published_at,
    running_index_key,
    running_key,
)

__all__ = ["Pause", "Pending", "ScheduleStore", "Snapshot", "definitions_key", "state_key"]


def state_key(namespace: str) -> str:
    """Return the state hash's key for ``namespace``."""
    return "{%s}:schedules" % namespace  # noqa: UP031 - braces are the hash tag


def definitions_key(namespace: str) -> str:
    """Return the key of the schedules stored at run time (``definitions``), by the state."""
    return "{%s}:schedule-defs" % namespace  # noqa: UP031 - braces are the hash tag


@dataclass(frozen=True)
class Pending:
    """A fire decided for admission: who decided it, and until when it is theirs."""

    node: str
    deadline_ms: int

    def to_json(self) -> str:
        return json.dumps({"node": self.node, "deadline": self.deadline_ms}, separators=(",", ":"))


@dataclass(frozen=True)
class Pause:
    """An operator's pause of one schedule."""

    by: str
    at_ms: int


@dataclass
class Snapshot:
    """The server clock and every schedule's state, read in one round trip."""

    now_ms: int
    through: dict[str, int] = field(default_factory=dict)
    paused: dict[str, Pause] = field(default_factory=dict)
    pending: dict[str, dict[int, Pending]] = field(default_factory=dict)
    #: Schedules whose ``through`` field holds something no scheduler writes.
    corrupt: dict[str, str] = field(default_factory=dict)
    #: The stored schedules' stamp: it moves at every change of one.
    stamp: int = 0


class ScheduleStore:
    """Read and write the scheduler's state hash on one redis-py client."""

    def __init__(self, redis: Any, namespace: str) -> None:
        self.redis = redis
        self.namespace = namespace
        self.key = state_key(namespace)
        self.definitions_key = definitions_key(namespace)
        self._commit = script("schedule_commit")
        self._snapshot = script("schedule_snapshot")
        self._publish = script("schedule_publish")
        #: Test seam: milliseconds added to the Redis server clock as this store reads it.
        self.clock_skew_ms = 0

    def __repr__(self) -> str:
        return f"<ScheduleStore {self.key}>"

    def _run(self, lua: LuaScript, *args: str, keys: tuple[str, ...] = ()) -> Any:
        """Run a script on the state's key (or ``keys``): its function, loaded where missing."""
        keys = keys or (self.key, self.definitions_key)
        with Translate(self):
            return call(self.redis, lua, keys, args)

    # -- reads ----------------------------------------------------------------------

    def server_time_ms(self) -> int:
        """Return the Redis server's clock (plus the test skew) in epoch milliseconds."""
        seconds, micros = self._run(self._snapshot, "clock")
        return int(seconds) * 1000 + int(micros) // 1000 + self.clock_skew_ms

    def snapshot(self) -> Snapshot:
        """Read the server clock and the whole state hash in one round trip."""
        seconds, micros, flat, stamp = self._run(self._snapshot, "state")
        snapshot = Snapshot(int(seconds) * 1000 + int(micros) // 1000 + self.clock_skew_ms)
        snapshot.stamp = int(stamp)
        for name, value in zip(flat[::2], flat[1::2], strict=True):
            _read_field(snapshot, text_of(name), text_of(value))
        return snapshot

    def running(self) -> list[Running]:
        """Return what every scheduler node published, node by node (two round trips)."""
        index = running_index_key(self.namespace)
        with Translate(self):
            nodes = [text_of(node) for node in self.redis.zrange(index, 0, -1)]
            if not nodes:
                return []
            documents = self.redis.mget([running_key(self.namespace, n) for n in nodes])
        return [entry for text in documents if text is not None for entry in decode_running(text)]

    def published_at(self, node: str) -> int | None:
        """Return when ``node`` last published (its last tick, epoch ms), ``None``: never."""
        with Translate(self):
            text = self.redis.get(running_key(self.namespace, node))
        return None if text is None else published_at(text)

    # -- writes ---------------------------------------------------------------------

    def publish(self, node: str, now_ms: int, schedules: list[Running], ttl_ms: int) -> int:
        """Publish what ``node`` runs for ``ttl_ms``, in one call; return how many nodes do."""
        document = encode_running(node, now_ms, schedules)
        keys = (running_key(self.namespace, node), running_index_key(self.namespace))
        return int(self._run(self._publish, node, document, str(int(ttl_ms)), keys=keys))

    def start(self, key: str, through: int) -> bool:
        """Record ``through`` for a schedule seen for the first time; say if this call did."""
        with Translate(self):
            return bool(self.redis.hsetnx(self.key, f"through {key}", str(through)))

    def commit(
        self,
        key: str,
        expected: int | None,
        through: int,
        fires: Iterable[int],
        pending: Pending,
        stamp: int | None = None,
    ) -> bool:
        """Move ``through`` from ``expected`` and hold ``fires`` pending; say if it won.

        ``stamp``: the stored schedules' stamp the decision was made with (a stored
        schedule's); the commit loses if they changed since.
        """
        args = [key, "" if expected is None else str(expected), str(through), pending.to_json()]
        args.append("" if stamp is None else str(stamp))
        args += [str(fire) for fire in fires]
        return bool(self._run(self._commit, *args))

    def unpublish(self, node: str) -> None:
        """Withdraw ``node``'s publication (a node that stops cleanly; others expire)."""
        with Translate(self):
            self.redis.zrem(running_index_key(self.namespace), node)
            self.redis.delete(running_key(self.namespace, node))

    def finish(self, key: str, epoch: int) -> None:
        """Forget a pending fire: it is admitted (or given up), by whichever node."""
        with Translate(self):
            self.redis.hdel(self.key, f"pending {key} {epoch}")

    def pause(self, key: str, by: str) -> Pause:
        """Pause ``key``: from their next tick, nodes admit none of its fires."""
        with Translate(self):
            pause = Pause(by, self.server_time_ms())
            value = json.dumps({"by": by, "at": pause.at_ms}, separators=(",", ":"))
            self.redis.hset(self.key, f"paused {key}", value)
        return pause

    def resume(self, key: str) -> bool:
        """Resume ``key``; fires that came due while it was paused stay unrun."""
        with Translate(self):
            return bool(self.redis.hdel(self.key, f"paused {key}"))

    def set_through(self, key: str, through: int) -> None:
        """Set ``through`` outright (operators and tests; a tick uses ``commit``)."""
        with Translate(self):
            self.redis.hset(self.key, f"through {key}", str(through))

    def forget(self, key: str) -> int:
        """Delete every field of ``key``: it starts afresh at its next tick."""
        with Translate(self):
            names = [text_of(name) for name in self.redis.hkeys(self.key)]
            mine = [n for n in names if n.split(" ")[1:2] == [key]]
            return int(self.redis.hdel(self.key, *mine)) if mine else 0


def _read_field(snapshot: Snapshot, name: str, value: str) -> None:
    kind, _, rest = name.partition(" ")
    try:
        if kind == "through":
            try:
                snapshot.through[rest] = int(value)
            except ValueError:
                snapshot.corrupt[rest] = value
        elif kind == "paused":
            data = json.loads(value)
            snapshot.paused[rest] = Pause(str(data.get("by", "")), int(data.get("at", 0)))
        elif kind == "pending":
            key, _, epoch = rest.rpartition(" ")
            data = json.loads(value)
            entry = Pending(str(data["node"]), int(data["deadline"]))
            snapshot.pending.setdefault(key, {})[int(epoch)] = entry
    except (ValueError, KeyError, TypeError, AttributeError):
        # A pause or pending entry no scheduler wrote: ignore it rather than stop
        # every schedule (a bad ``through`` is reported in ``corrupt``).
        return
