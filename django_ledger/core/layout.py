"""How a queue is laid out in shards: their names, which shard holds an id, the layout key.

A queue of ``N`` shards is ``N`` one-shard ledgers side by side, each under its own hash
tag, so each its own cluster slot. Shard 0 keeps the queue's own tag (``{ns:emails}``),
so a queue of one shard is exactly the queue of before; shard ``i > 0`` is the queue
``emails#k``, where ``k`` is the first number whose slot falls in the ``i``-th ``N``-th
of the slot ring counted from shard 0's slot. A cluster whose slots are split evenly
among its masters (what ``redis-cli --cluster create`` does) then has the shards on as
many different masters as it can.

The number of shards is recorded under shard 0's tag (``{ns:emails}:layout``) the first
time a queue is used with more than one, because changing it moves ids between shards,
and a duplicate that lands on another shard than its original is not recognised.
``check_layout`` refuses a ledger whose number of shards disagrees with a queue that
holds records.
"""

from __future__ import annotations

import zlib
from typing import Any, NamedTuple

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from .errors import LedgerError

__all__ = [
    "QUEUE_KEY_NAMES",
    "LayoutMismatch",
    "QueueKeys",
    "bulk_run_key",
    "bulk_runs_key",
    "check_layout",
    "homes_key",
    "layout_key",
    "parse_shards",
    "shard_index",
    "shard_queues",
    "stored_shards",
]

#: The most shards one queue may have (each is 16 keys and one script call per visit).
MAX_SHARDS = 64


class QueueKeys(NamedTuple):
    """A queue's keys, in the order every queue script receives them in ``KEYS``.

    Lua names them alike (``KEYS.records``, ``KEYS.ready``, ...: the registry prepends one line
    built from these fields, ``core/scripts.py``); docs/encoding.md says what each holds.
    """

    records: str  # hash: request id -> the record's bytes
    ready: str  # zset: PENDING ids by priority band and due time
    leases: str  # zset: CLAIMED ids by lease expiry
    gate: str  # string: exists while the queue is closed to claims
    quarantine: str  # hash: request id -> corrupt bytes set aside
    completed: str  # zset: COMPLETED ids by when they ended
    failed: str  # zset: FAILED ids by when they ended
    dead: str  # zset: DEAD ids by when they ended
    fences: str  # string: the highest fence given
    results: str  # hash: request id -> its result document
    wake: str  # zset of one member: something may be due that no worker claimed yet
    limits: str  # hash: RATE, CONCURRENCY, KEY and their state
    flows: str  # hash: the queue's workflows
    keyed: str  # zset: a queue with a KEY: its pool of due records by key, and turns
    held: str  # zset: a queue with a RATE: its held (prefetched) claims, 'h' .. id
    cancels: str  # stream: running claims cancelled, for their workers to hear at once
    unique: str  # hash: a unique call's digest -> the request id holding it (unique.lua)
    progress: str  # hash: request id -> the progress a running task reported (progress.py)

    @classmethod
    def of(cls, namespace: str, queue: str) -> QueueKeys:
        """Return the keys of queue ``queue`` of ``namespace``, all under its hash tag."""
        tag = _tag(namespace, queue)
        return cls(*(f"{tag}:{name}" for name in cls._fields))


#: The names of a queue's keys, in ``KEYS`` order.
QUEUE_KEY_NAMES: tuple[str, ...] = QueueKeys._fields


class LayoutMismatch(LedgerError):
    """The queue holds records laid out in another number of shards than asked."""

    def __init__(self, namespace: str, queue: str, stored: int, wanted: int) -> None:
        super().__init__(
            f"queue {namespace}:{queue} holds records in {stored} shard(s), not {wanted}: "
            "changing SHARDS would move request ids to other shards, where a duplicate "
            "is no longer recognised. Set SHARDS back to "
            f"{stored}, or migrate: close the gate, ledger_export, purge the queue, change "
            "SHARDS, ledger_import (see 'Changing the number of shards' in 'Redis Cluster' "
            "of the django-ledger docs)"
        )
        self.stored = stored
        self.wanted = wanted


def _tag(namespace: str, queue: str) -> str:
    return "{%s:%s}" % (namespace, queue)  # noqa: UP031 - braces are the hash tag


def _slot(namespace: str, queue: str) -> int:
    return int(key_slot(_tag(namespace, queue).encode()))


def layout_key(namespace: str, queue: str) -> str:
    """The key recording a queue's number of shards (under shard 0's tag)."""
    return f"{_tag(namespace, queue)}:layout"


def bulk_run_key(namespace: str, queue: str, run_id: str) -> str:
    """The hash of one bulk run on a queue (or on one shard: ``queue`` is the shard's name)."""
    return f"{_tag(namespace, queue)}:bulk:{run_id}"


def bulk_runs_key(namespace: str, queue: str) -> str:
    """The zset of a queue's bulk runs by when each started (under shard 0's tag)."""
    return f"{_tag(namespace, queue)}:bulks"


def homes_key(namespace: str, queue: str) -> str:
    """The counter claimers of a sharded queue take their home shards from."""
    return f"{_tag(namespace, queue)}:homes"


def shard_queues(namespace: str, queue: str, shards: int) -> tuple[str, ...]:
    """The queue names of the shards, shard 0 first (the queue itself)."""
    if isinstance(shards, bool) or not isinstance(shards, int):
        raise TypeError(f"shards must be an int, not {type(shards).__name__}")
    if not 1 <= shards <= MAX_SHARDS:
        raise ValueError(f"shards must be from 1 to {MAX_SHARDS}, got {shards}")
    ring = REDIS_CLUSTER_HASH_SLOTS
    # The ring in `shards` equal segments: shard 0 sits where its tag hashes; each other
    # shard takes the middle half of one of the other segments (clear of the boundaries
    # between masters, which a cluster's own split may put a slot or two either way).
    home = key_slot(_tag(namespace, queue).encode()) * shards // ring
    names = [queue]
    for segment in (s for s in range(shards) if s != home):
        low, high = segment * ring // shards, (segment + 1) * ring // shards
        quarter = (high - low) // 4
        suffix = 0
        while not low + quarter <= _slot(namespace, f"{queue}#{suffix}") < high - quarter:
            suffix += 1
        names.append(f"{queue}#{suffix}")
    return tuple(names)


def shard_index(request_id: object, shards: int) -> int:
    """The shard that holds ``request_id``: CRC-32 of its UTF-8 bytes, modulo ``shards``.

    Stable across processes, versions and languages (unlike Python's ``hash``). A value
    that is not a usable id goes to shard 0, whose ledger refuses it as usual.
    """
    if shards == 1 or not isinstance(request_id, str):
        return 0
    try:
        data = request_id.encode("utf-8")
    except UnicodeEncodeError:
        return 0
    return zlib.crc32(data) % shards


def parse_shards(raw: bytes | None) -> int:
    """The number of shards a layout key's value says (``LedgerError``: not one)."""
    if raw is None:
        return 1
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_SHARDS:
        raise LedgerError(f"the layout key holds {raw!r}, not a number of shards")
    return value


def stored_shards(runner: Any, namespace: str, queue: str) -> int:
    """The number of shards the queue's records are laid out in (1 with no layout key)."""
    with runner.translate_errors():
        return parse_shards(runner.redis.get(layout_key(namespace, queue)))


def check_layout(runner: Any, namespace: str, queue: str, shards: int) -> None:
    """Make sure the queue is laid out in ``shards`` shards, or refuse (``LayoutMismatch``).

    One ``GET`` when the layout agrees (no key means one shard: every queue of before).
    When it disagrees, the queue may change layout only if it holds no record and no
    quarantined entry in any shard of its stored layout: then the new number is written
    (or the key removed, for one shard). Two processes configured differently at the
    same moment on an empty queue can each pass once; the first records then decide.
    Two configured alike never refuse each other: a process that read no key, then
    found records, reads the key again before it refuses, because the layout is written
    before a queue's first record.
    """
    key = layout_key(namespace, queue)
    stored = stored_shards(runner, namespace, queue)
    if stored == shards:
        return
    with runner.translate_errors():
        for name in shard_queues(namespace, queue, stored):
            tag = _tag(namespace, name)
            if runner.redis.hlen(f"{tag}:records") or runner.redis.hlen(f"{tag}:quarantine"):
                if stored_shards(runner, namespace, queue) == shards:
                    return  # laid out so meanwhile, by a process configured alike
                raise LayoutMismatch(namespace, queue, stored, shards)
    if shards == 1:
        runner.write("DEL", key)
    else:
        runner.write("SET", key, str(shards))
