"""Counters kept by the workers: outcomes and time histograms per queue, task and minute.

A worker adds each settlement it makes to a ``Tally`` in memory; its heartbeat beat
flushes the tally, at most once every ``FLUSH_EVERY`` seconds, with one ``counters.lua``
call per queue. The script adds the counts to the queue's hash of this minute and of
this hour, both under the queue's hash tag (``{ns:queue}:counts:...``), so on a Redis
Cluster a queue's counters live on the node that holds the queue. Minutes are kept a
day and hours 30 days: the bucket that falls out is deleted by the same script (every
key it touches is named in its call), the rest by key expiry.

A worker killed between two flushes loses the counts of its unflushed tally (at most
one beat's worth); a flush is one script call, so nothing is ever counted twice.

Given the queues a worker serves, a flush also samples each queue's depth (pending, of
them due now, claimed, dead: the ready, leases and dead indexes' sizes) into the same
minute and hour in the same script call; a queue with nothing to flush is sampled on
its own at most every ``SAMPLE_EVERY`` seconds, while its last sample had records due or
claimed (an idle worker on a quiet queue makes no call). A bucket keeps the most any sample saw
(``Depth``), so several workers sampling one queue give its peak, not a sum. A sharded
queue's shards beyond the first are sampled into their own slots' counters (one call
each, at most every ``SAMPLE_EVERY`` s) and summed when read.

``Counters.read(queue, window)`` reads a window (``hour``: 60 one-minute buckets;
``day``: 24 one-hour buckets; ``week``: 168 one-hour buckets) in one pipeline; what
it reads back as (``Series``, ``Stat``, ``Depth``) is ``core/counter_series.py``'s,
re-exported here.
"""

from __future__ import annotations

import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from .counter_series import (
    CODE_OUTCOMES,
    DEPTH_FIELDS,
    EDGES,
    OUTCOME_CODES,
    OUTCOMES,
    WINDOWS,
    Depth,
    LastError,
    Series,
    Stat,
    bucket_of,
    percentile,
    rounded,
)
from .errors import LedgerError
from .layout import layout_key, parse_shards, shard_queues
from .scripts import call, script
from .transport import text_of

__all__ = [
    "EDGES",
    "FLUSH_EVERY",
    "MAX_ERROR",
    "OUTCOMES",
    "WINDOWS",
    "Counters",
    "Depth",
    "LastError",
    "Series",
    "Stat",
    "Tally",
    "bucket_of",
    "percentile",
    "rounded",
]

#: Seconds between two flushes of one worker's tally (the beat may come more often).
FLUSH_EVERY = 2.0
#: Seconds between two depth samples of a queue that had nothing else to flush.
SAMPLE_EVERY = 10.0
#: Minutes and hours kept: ``counters.lua`` deletes the bucket that falls out of them.
KEEP_MINUTES, KEEP_HOURS = 1440, 720
#: Seconds between two reads of the server clock the counters' buckets follow.
CLOCK_EVERY = 300.0
#: The task name counted when a settlement has none (a raw handler's job).
NO_NAME = "-"
#: What the scheduler counts per schedule (``schedule/ticker.py``): field code -> name.
SCHEDULE_CODES = {"F": "fired", "S": "skipped", "M": "misfired"}
#: Characters kept of a last error's class and of its first line.
MAX_ERROR = 200
#: Task names whose last error one queue keeps at most (one small hash per queue).
MAX_ERROR_TASKS = 1000


class Tally:
    """What one worker counted since its last flush, by queue: field -> count."""

    def __init__(self, enabled: bool = True) -> None:
        #: ``False``: the tally counts nothing and a flush writes nothing (``COUNTERS``).
        self.enabled = enabled
        self._lock = threading.Lock()
        #: (queue, task, outcome code, run bucket, wait bucket) -> settlements: one dict
        #: update per settlement; ``take_all`` spreads them into hash fields.
        self._counts: dict[tuple[str, str, str, int | None, int | None], int] = {}
        self._errors: dict[str, dict[str, str]] = defaultdict(dict)

    def error(self, queue: str, task: str, error_class: str, line: str, at_ms: int) -> None:
        """Keep the last error of ``task`` on ``queue`` (its class and first line)."""
        if not self.enabled:
            return
        value = json.dumps([error_class[:MAX_ERROR], line[:MAX_ERROR], int(at_ms)])
        with self._lock:
            self._errors[queue][task or NO_NAME] = value

    def add(
        self,
        queue: str,
        task: str,
        outcome: str,
        run_s: float | None = None,
        wait_s: float | None = None,
    ) -> None:
        """Count one outcome of ``task`` on ``queue``, with its run and wait times."""
        if not self.enabled:
            return
        key = (
            queue,
            task or NO_NAME,
            OUTCOME_CODES[outcome],  # an unknown outcome fails here, not in the flush
            None if run_s is None else bucket_of(run_s),
            None if wait_s is None else bucket_of(max(0.0, wait_s)),
        )
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1

    def take(self) -> dict[str, dict[str, int]]:
        """Everything counted so far, which the tally forgets (its errors too)."""
        return self.take_all()[0]

    def take_all(self) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, str]]]:
        """The counts and the last errors kept so far, which the tally forgets."""
        with self._lock:
            taken, self._counts = self._counts, {}
            errors, self._errors = self._errors, defaultdict(dict)
        counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for (queue, name, code, run, wait), n in taken.items():
            fields = counts[queue]
            fields[f"{code}:{name}"] += n
            if run is not None:
                fields[f"t{run}:{name}"] += n
            if wait is not None:
                fields[f"w{wait}:{name}"] += n
        spread = {queue: dict(fields) for queue, fields in counts.items()}
        return spread, {queue: kept for queue, kept in errors.items() if kept}


class Counters:
    """Flush tallies into, and read windows from, the counters of one namespace."""

    def __init__(self, redis: Any, namespace: str) -> None:
        self.redis = redis
        self.namespace = namespace
        self._counters = script("counters")
        #: The server clock less this host's (ms), and when it was read (monotonic).
        self._offset: tuple[float, float] | None = None
        self._last_flush = 0.0
        #: When each queue's depth was last sampled (``time.monotonic``).
        self._sampled: dict[str, float] = {}
        #: Whether each queue's last sample had records due or claimed (else an idle
        #: flush does not sample it again until it has counts).
        self._waiting: dict[str, bool] = {}
        #: Each served queue's shard names, read from its layout key once.
        self._shards: dict[str, tuple[str, ...]] = {}
        #: Called with each queue's depth sample (its shards summed), if set: the
        #: worker's Prometheus gauges (``worker/metrics.py``) read the same numbers.
        self.on_sample: Callable[[str, Depth], None] | None = None

    def prefix(self, queue: str) -> str:
        """The start of every counter key of ``queue`` (the queue's hash tag)."""
        return "{%s:%s}:counts" % (self.namespace, queue)  # noqa: UP031 - the hash tag

    def depth_keys(self, queue: str) -> list[str]:
        """The counter prefix and the indexes a depth sample of ``queue`` reads (one slot)."""
        tag = "{%s:%s}" % (self.namespace, queue)  # noqa: UP031 - the hash tag
        return [self.prefix(queue), f"{tag}:ready", f"{tag}:leases", f"{tag}:dead"]

    def add_keys(self, prefix: str, at_ms: int, indexes: Iterable[str] = ()) -> list[str]:
        """The keys ``counters.lua`` writes for a time: buckets, the ones that fall out, errors.

        ``indexes``: the queue's ready, leases and dead indexes, for a depth sample.
        """
        minute, hour = at_ms // 60_000, at_ms // 3_600_000
        return [
            f"{prefix}:m:{minute}",
            f"{prefix}:h:{hour}",
            f"{prefix}:m:{minute - KEEP_MINUTES}",
            f"{prefix}:h:{hour - KEEP_HOURS}",
            f"{prefix}:e",
            f"{prefix}:mi",
            f"{prefix}:hi",
            *indexes,
        ]

    def _now(self, prefix: str, now_ms: int) -> int:
        """``now_ms``, or (0) the server clock as last read, read again every ``CLOCK_EVERY`` s.

        The buckets follow the server's clock, as every worker's counts must; it is read
        from the node holding ``prefix`` (one call), then kept as an offset to this host's.
        """
        if now_ms:
            return int(now_ms)
        local = time.time() * 1000
        if self._offset is None or time.monotonic() - self._offset[1] > CLOCK_EVERY:
            seconds, micros = call(self.redis, script("server_time"), [prefix], [])
            self._offset = (int(seconds) * 1000 + int(micros) / 1000 - local, time.monotonic())
        return int(local + self._offset[0])

    def _read(self, prefix: str, resolution: str, count: int, now_ms: int) -> list[Any]:
        """``[now, each bucket's fields (oldest first), the last errors]``, as dicts."""
        now = self._now(prefix, now_ms)
        at = now // (60_000 if resolution == "m" else 3_600_000)
        pipe = self.redis.pipeline(transaction=False)
        for bucket in range(at - count + 1, at + 1):
            pipe.hgetall(f"{prefix}:{resolution}:{bucket}")
        pipe.hgetall(f"{prefix}:e")
        return [now, *pipe.execute()]

    def shards_of(self, queue: str) -> tuple[str, ...]:
        """The queue's shard names, shard 0 first (its layout key, read once and kept)."""
        names = self._shards.get(queue)
        if names is None:
            try:
                count = parse_shards(self.redis.get(layout_key(self.namespace, queue)))
            except LedgerError:
                count = 1  # the ledger refuses such a layout: its shard 0 is the queue
            names = self._shards[queue] = shard_queues(self.namespace, queue, count)
        return names

    def _add(self, prefix: str, now_ms: int, args: list[Any], indexes: Iterable[str] = ()) -> Any:
        at = self._now(prefix, now_ms)
        keys = self.add_keys(prefix, at, indexes)
        return call(self.redis, self._counters, keys, [0, at, *args])

    def schedules_prefix(self) -> str:
        """The start of the scheduler's counter keys (the schedule state's hash tag)."""
        return "{%s}:schedules:counts" % self.namespace  # noqa: UP031 - the hash tag

    def add_schedules(self, counts: dict[str, int], now_ms: int = 0) -> None:
        """Add the scheduler's counts (``F:<key>`` fired, ``S:`` skipped, ``M:`` misfired)."""
        self._add(self.schedules_prefix(), now_ms, [0, 0, *_flat(counts)])

    def schedule_counts(self, window: str = "hour", now_ms: int = 0) -> dict[str, dict[str, int]]:
        """Each schedule's fired, skipped and misfired counts over ``window``: one call."""
        resolution, count, _ = _window(window)
        reply = self._read(self.schedules_prefix(), resolution, count, now_ms)
        found: dict[str, dict[str, int]] = {}
        for fields in reply[1 : count + 1]:
            for raw, value in fields.items():
                code, _, key = text_of(raw).partition(":")
                if code in SCHEDULE_CODES:
                    counts = found.setdefault(key, dict.fromkeys(SCHEDULE_CODES.values(), 0))
                    counts[SCHEDULE_CODES[code]] += int(value)
        return found

    def add(
        self,
        queue: str,
        counts: dict[str, int],
        now_ms: int = 0,
        errors: dict[str, str] | None = None,
        *,
        sample: bool = False,
    ) -> Depth | None:
        """Add ``counts`` (field -> count) to the queue's minute and hour: one call.

        ``errors`` (task name -> ``Tally.error``'s JSON) overwrite each task's last
        error in the same call; with ``sample``, the same call samples the depth of
        ``queue`` (one shard: its own indexes) into both buckets and returns it.
        """
        errors = errors or {}
        args = [len(errors), MAX_ERROR_TASKS, *_flat(errors, str), *_flat(counts)]
        indexes = self.depth_keys(queue)[1:] if sample else ()
        reply = self._add(self.prefix(queue), now_ms, args, indexes)
        return Depth(*(int(v) for v in reply[1:5])) if sample else None

    def flush(self, tally: Tally, *, force: bool = False, queues: Iterable[str] = ()) -> bool:
        """Write the tally, unless the last flush was under ``FLUSH_EVERY`` s ago.

        The counts are taken from the tally before the calls: a call that fails loses
        its queue's batch rather than risk adding it twice (an unanswered call may
        have run), so every count is written at most once. Each of ``queues`` (those
        the worker serves) has its depth sampled in its call, or, with nothing to
        flush, in a call of its own at most every ``SAMPLE_EVERY`` s (``force``: now)
        while its last sample had records due or claimed: an idle worker on a queue
        with nothing due and nothing running makes no call at all.
        """
        clock = time.monotonic()
        if not force and clock - self._last_flush < FLUSH_EVERY:
            return False
        self._last_flush = clock
        failed: Exception | None = None
        counts_of, errors_of = tally.take_all()
        served = dict.fromkeys(queues) if tally.enabled else {}
        with_counts = dict.fromkeys([*counts_of, *errors_of])
        idle = [
            q
            for q in served
            if q not in with_counts
            and self._waiting.get(q, True)
            and (force or clock - self._sampled.get(q, -SAMPLE_EVERY) >= SAMPLE_EVERY)
        ]
        for queue in [*with_counts, *idle]:
            try:
                self._write(queue, counts_of.get(queue, {}), errors_of.get(queue), queue in served)
            except Exception as exc:  # the other queues are still written
                failed = exc
        if failed is not None:
            raise failed
        return True

    def _write(
        self, queue: str, counts: dict[str, int], errors: dict[str, str] | None, sample: bool
    ) -> None:
        """One queue's flush: its counts, and its depth if it is one the worker serves."""
        if not sample:
            self.add(queue, counts, errors=errors)
            return
        clock = time.monotonic()
        shards = self.shards_of(queue)
        # The other shards' samples are calls of their own: at most every SAMPLE_EVERY s.
        every_shard = clock - self._sampled.get(queue, -SAMPLE_EVERY) >= SAMPLE_EVERY
        depth = self.add(queue, counts, errors=errors, sample=True)
        if len(shards) > 1 and every_shard:
            for shard in shards[1:]:
                found = self.add(shard, {}, sample=True)
                depth = found if depth is None or found is None else depth.plus(found)
        elif len(shards) > 1:
            depth = None  # one shard's sample is not the queue's depth
        if every_shard or len(shards) == 1:
            self._sampled[queue] = clock
        if depth is not None:
            # Nothing due and nothing running: the next sample waits for the queue's next
            # counts (what is later falls due, is claimed and counted, and sampled then).
            self._waiting[queue] = depth.due > 0 or depth.claimed > 0
            if self.on_sample is not None:
                self.on_sample(queue, depth)

    def read(self, queue: str, window: str = "hour", now_ms: int = 0, shards: int = 1) -> Series:
        """One window of ``queue``'s counters, in one pipeline (one more per shard).

        ``shards``: the queue's number of shards, whose depth samples are summed.
        """
        resolution, count, seconds = _window(window)
        reply = self._read(self.prefix(queue), resolution, count, now_ms)
        now = int(reply[0])
        step = seconds * 1000
        first = (now // step - count + 1) * step
        buckets: list[Stat] = []
        by_task: dict[str, list[Stat]] = {}
        depth = [_depth(fields) for fields in reply[1 : count + 1]]
        if shards > 1:
            for shard in shard_queues(self.namespace, queue, shards)[1:]:
                # Every shard's buckets at the same time.
                theirs = self._read(self.prefix(shard), resolution, count, now)
                for position, fields in enumerate(theirs[1 : count + 1]):
                    found, mine = _depth(fields), depth[position]
                    depth[position] = found if mine is None else mine.plus(found or _ZERO)
        for position, fields in enumerate(reply[1 : count + 1]):
            whole = Stat()
            for raw, value in fields.items():
                metric, _, name = text_of(raw).partition(":")
                if not _known(metric):
                    continue
                stats = by_task.get(name)
                if stats is None:
                    stats = by_task[name] = [Stat() for _ in range(count)]
                stats[position].add(metric, int(value))
                whole.add(metric, int(value))
            buckets.append(whole)
        return Series(
            queue=queue,
            window=window,
            bucket_seconds=seconds,
            now_ms=now,
            starts=[first + i * step for i in range(count)],
            buckets=buckets,
            task_buckets=by_task,
            errors=_errors(reply[count + 1]),
            depth=depth,
        )


_ZERO = Depth(0, 0, 0, 0)


def _window(window: str) -> tuple[str, int, int]:
    """A window's resolution, buckets and seconds per bucket (``ValueError``: no such window)."""
    if window not in WINDOWS:
        raise ValueError(f"window must be one of {', '.join(WINDOWS)}, got {window!r}")
    return WINDOWS[window]


def _depth(fields: dict[Any, Any]) -> Depth | None:
    """The depth sample a bucket holds (its ``q:`` fields), ``None`` if it has none."""
    found = {}
    for raw, value in fields.items():
        metric, _, name = text_of(raw).partition(":")
        if metric == "q" and name in DEPTH_FIELDS:
            try:
                found[name] = int(value)
            except ValueError:
                continue  # not one this code wrote
    if not found:
        return None
    return Depth(*(found.get(name, 0) for name in DEPTH_FIELDS))


def _errors(fields: dict[Any, Any]) -> dict[str, LastError]:
    found: dict[str, LastError] = {}
    for raw, value in fields.items():
        try:
            error_class, line, at_ms = json.loads(value)
            found[text_of(raw)] = LastError(str(error_class), str(line), int(at_ms))
        except (ValueError, TypeError):
            continue  # not one this code wrote: not shown
    return found


def _known(metric: str) -> bool:
    if metric in CODE_OUTCOMES:
        return True
    return (
        len(metric) > 1
        and metric[0] in "tw"
        and metric[1:].isdecimal()
        and int(metric[1:]) <= len(EDGES)
    )


def _flat(fields: dict[str, Any], value_of: Callable[[Any], Any] = int) -> list[Any]:
    """``fields`` as the script takes them: name, value, name, value, ... (counts as ints)."""
    return [x for name, value in fields.items() for x in (name, value_of(value))]
