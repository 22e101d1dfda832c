"""Helpers shared by the core ledger's per-operation tests (no fixtures here).

Everything reads the real Redis the suite started: raw key contents, the server's
command counters (``INFO commandstats``, summed over the masters of a cluster) and the
server clock.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from django_ledger import Ledger, State
from django_ledger.core.library import library
from django_ledger.core.results import RepairReport
from tests.support.redis_server import free_port

#: A valid W3C trace context.
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
#: Bytes that are no record of any version.
GARBAGE = b"not a ledger record"


def make_ledger(
    redis_client: redis.Redis, namespace: str, optimized: bool, queue: str = "q", **kw: Any
) -> Ledger:
    """Build a ledger of ``namespace`` (cleaned up by the ``namespace`` fixture)."""
    return Ledger(redis_client, namespace, queue, optimized=optimized, **kw)


def fused_twin(ledger: Ledger) -> Ledger:
    """Return an optimized ledger on the same queue, to set the stage quickly.

    Tests of the reference path use it to admit or claim many records in a few
    script calls when those records are not what the test is about.
    """
    return Ledger(
        ledger.redis,
        ledger.namespace,
        ledger.queue,
        max_payload_bytes=ledger.max_payload_bytes,
        max_records=ledger.max_records,
        optimized=True,
        max_attempts=ledger.max_attempts,
        retention=ledger.retention,
        max_retained=ledger.max_retained,
    )


# -- raw contents ---------------------------------------------------------------------


def dump(ledger: Ledger) -> dict[str, Any]:
    """Return the exact contents of every key of the ledger's queue."""
    client = ledger.redis
    out: dict[str, Any] = {}
    for key in ledger.keys:
        kind = client.type(key)
        if kind == b"hash":
            out[key] = client.hgetall(key)
        elif kind == b"zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == b"string":
            out[key] = client.get(key)
        elif kind == b"none":
            out[key] = None
        else:  # pragma: no cover - no ledger key has another type
            raise AssertionError(f"{key} is a {kind!r}")
    return out


def namespace_keys(client: redis.Redis, namespace: str) -> set[bytes]:
    """Return every key of ``namespace`` that exists."""
    keys = set(client.scan_iter(match=f"{{{namespace}:*", count=1000))
    keys |= set(client.scan_iter(match=f"{namespace}:*", count=1000))
    return keys


def raw(ledger: Ledger, request_id: str) -> bytes | None:
    """Return the stored bytes of ``request_id``."""
    value: bytes | None = ledger.redis.hget(ledger.records_key, request_id)
    return value


def index(ledger: Ledger, key: str) -> dict[str, int]:
    """Return a sorted set of the ledger as {request_id: score}."""
    return {
        member.decode(): int(score)
        for member, score in ledger.redis.zrange(key, 0, -1, withscores=True)
    }


def indexes_of(ledger: Ledger, request_id: str) -> dict[str, int]:
    """Return the indexes (by short name) that hold ``request_id``, with its score."""
    names = {
        "ready": ledger.ready_key,
        "leases": ledger.leases_key,
        "completed": ledger.terminal_keys[State.COMPLETED],
        "failed": ledger.terminal_keys[State.FAILED],
        "dead": ledger.terminal_keys[State.DEAD],
    }
    found = {}
    for name, key in names.items():
        score = ledger.redis.zscore(key, request_id)
        if score is not None:
            found[name] = int(score)
    return found


def corrupt(ledger: Ledger, request_id: str, garbage: bytes = GARBAGE) -> None:
    """Overwrite the stored bytes of ``request_id`` with garbage (indexes untouched)."""
    ledger.redis.hset(ledger.records_key, request_id, garbage)


# -- time and repair ------------------------------------------------------------------


def advance(ledger: Ledger, ms: int) -> None:
    """Move the ledger's view of the server clock forward by ``ms``."""
    ledger.clock_skew_ms += ms


def repair_all(ledger: Ledger) -> RepairReport:
    """Run one whole repair cycle and return its summed counts."""
    total = RepairReport()
    for report in ledger.repair_cycle(count=1000):
        total.add(report)
    return total


def expire_and_repair(ledger: Ledger, ms: int) -> RepairReport:
    """Advance the clock by ``ms`` and repair, so expired leases are taken back."""
    advance(ledger, ms)
    return repair_all(ledger)


# -- round trips ----------------------------------------------------------------------


def servers(client: redis.Redis | RedisCluster) -> list[redis.Redis]:
    """Return a client per server behind ``client``: itself, or each master of a cluster."""
    if isinstance(client, RedisCluster):
        return [client.get_redis_connection(node) for node in client.get_primaries()]
    return [client]


def command_calls(client: redis.Redis | RedisCluster) -> dict[str, int]:
    """Return how often each command ran, from ``INFO commandstats`` (summed over masters)."""
    calls: dict[str, int] = {}
    for server in servers(client):
        for name, values in server.info("commandstats").items():
            command = name.removeprefix("cmdstat_")
            calls[command] = calls.get(command, 0) + int(values["calls"])
    return calls


def load_scripts(client: redis.Redis | RedisCluster) -> None:
    """Load the ledger's function library (on every master), so no loading disturbs a count."""
    for server in servers(client):
        server.function_load(library().source, replace=True)


@dataclass
class Calls:
    """The commands a block of code sent, by name (filled when the block ends)."""

    by_command: dict[str, int] = field(default_factory=dict)

    @property
    def fcall(self) -> int:
        return self.by_command.get("fcall", 0)


@contextmanager
def count_calls(client: redis.Redis | RedisCluster) -> Iterator[Calls]:
    """Count the commands the server ran inside the block (``INFO`` itself left out).

    On a cluster the counts are summed over every master, so ``client`` may be a
    ``RedisCluster`` (the suite's cluster mode). Scripts are loaded first, so every
    script call is exactly one ``FCALL``. Redis counts the commands a function runs
    too, so only ``fcall`` counts round trips.
    """
    load_scripts(client)
    before = command_calls(client)
    calls = Calls()
    yield calls
    after = command_calls(client)
    for name, count in after.items():
        delta = count - before.get(name, 0)
        if name != "info" and delta:
            calls.by_command[name] = delta


# -- an unreachable Redis ---------------------------------------------------------------


def unreachable_client() -> redis.Redis:
    """Return a bytes client on a loopback port where nothing listens, without retries."""
    return redis.Redis(
        host="127.0.0.1",
        port=free_port(),
        socket_connect_timeout=0.5,
        socket_timeout=0.5,
        retry=Retry(NoBackoff(), 0),
    )
