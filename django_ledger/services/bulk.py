"""Bulk runs: an action over everything a filter matches, run server-side in pages.

A run is a small hash per shard under the queue's hash tag (``core/layout.py``'s
``bulk_run_key``): shard 0's holds the filter, who started it, the preview's count and
the run's state; each shard's holds where its reading stands and its counts, moved by
the same script call that acts (``core/bulk.py``). Whoever steps a run (the admin's
progress page, the API, ``manage.py ledger_records``) holds it for a while: pages go on
until ``seconds`` are spent, and a stepper that dies lets go when its hold runs out, so
any face can resume the run where the last page left it. The run is audited once, when
it ends: a log line (``django_ledger.bulk``) and, when a user started it, an entry of
the admin's history, both with the filter and the final counts.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import redis as redis_py
from django.utils.translation import gettext

from ..conf import get_ledger
from ..core import bulk
from ..core.layout import bulk_runs_key
from ..core.sharded import AnyLedger
from ..tasks.record_cancel import cancel_record, effects_database
from .bulk_filter import BulkFilter, BulkRefused

__all__ = [
    "MAX_RECORDS",
    "BulkBusy",
    "BulkRun",
    "load_run",
    "preview",
    "recent_runs",
    "start_run",
    "step_run",
]

logger = logging.getLogger("django_ledger.bulk")

#: Most records one run may act on: a larger filter is refused (narrow it, or run twice).
MAX_RECORDS = 1_000_000
#: How long a run's hashes are kept (seconds) after it started.
KEEP_SECONDS = 7 * 24 * 3600
_HOLD_MS = 10_000


class BulkBusy(BulkRefused):
    """Another stepper holds the run now: try again once it lets go."""


@dataclass(frozen=True)
class BulkRun:
    """A run as stored: its filter, who started it, and how far it has come."""

    id: str
    filter: BulkFilter
    by: str
    reason: str
    user_id: int | None
    created: int
    started: list[int]
    matched: int
    state: str  # "running" or "finished"
    done: int
    skipped: int
    finished_at: int | None

    @property
    def finished(self) -> bool:
        return self.state == "finished"

    @property
    def seen(self) -> int:
        return self.done + self.skipped

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "filter": self.filter.as_dict(),
            "by": self.by,
            "reason": self.reason,
            "created": self.created,
            "matched": self.matched,
            "state": self.state,
            "done": self.done,
            "skipped": self.skipped,
            "finished_at": self.finished_at,
        }


def preview(spec: BulkFilter) -> int:
    """How many records the filter matches now (one call per index, or per page of one
    with a task to match)."""
    ledger = get_ledger(spec.queue)
    total = 0
    for shard in ledger.shards:
        now = shard.server_time_ms() + 1
        for segment in spec.segments():
            total += bulk.count_matches(shard, segment, started=now, task=spec.task)
    return total


def start_run(
    spec: BulkFilter,
    *,
    by: str,
    user_id: int | None = None,
    reason: str = "",
    max_records: int = MAX_RECORDS,
) -> BulkRun:
    """Record a new run of ``spec`` (refused past ``max_records``); nothing is acted on yet."""
    matched = preview(spec)
    if matched > max_records:
        raise BulkRefused(
            gettext(
                "the filter matches %(count)d records, more than %(max)d: narrow it "
                "(a time range, a task) and run it in parts"
            )
            % {"count": matched, "max": max_records}
        )
    ledger = get_ledger(spec.queue)
    run_id = uuid.uuid4().hex
    started = [shard.server_time_ms() + 1 for shard in ledger.shards]
    head = ledger.shards[0]
    meta = {
        "filter": spec.as_dict(),
        "by": by[:200],
        "reason": reason[:500],
        "user_id": user_id,
        "created": started[0],
        "started": started,
        "matched": matched,
    }
    with ledger.translate_errors():
        for index, shard in enumerate(ledger.shards):
            key = bulk.run_key(shard, run_id)
            fields: dict[str, Any] = {"seg": 0, "score": "", "id": "", "done": 0, "skipped": 0}
            if index == 0:
                fields.update(spec=json.dumps(meta), state="running", token="", hold=0)
            pipe = shard.redis.pipeline(transaction=False)
            pipe.hset(key, mapping=fields)
            pipe.expire(key, KEEP_SECONDS)
            pipe.execute()
        runs_key = bulk_runs_key(head.namespace, head.queue)
        head.redis.zadd(runs_key, {run_id: started[0]})
        head.redis.zremrangebyscore(runs_key, "-inf", started[0] - KEEP_SECONDS * 1000)
        head.redis.expire(runs_key, KEEP_SECONDS)
    return load_run(spec.queue, run_id)


def load_run(queue: str, run_id: str) -> BulkRun:
    """Read run ``run_id`` of ``queue`` (``BulkRefused`` when there is none)."""
    if not isinstance(run_id, str) or len(run_id) != 32 or set(run_id) - set("0123456789abcdef"):
        raise BulkRefused(gettext("%(run)r names no bulk run") % {"run": str(run_id)[:40]})
    ledger = get_ledger(queue)
    with ledger.translate_errors():
        head = ledger.shards[0].redis.hgetall(bulk.run_key(ledger.shards[0], run_id))
        counts = [
            shard.redis.hmget(bulk.run_key(shard, run_id), "done", "skipped")
            for shard in ledger.shards
        ]
    if not head or b"spec" not in head:
        raise BulkRefused(
            gettext("no bulk run %(run)s on queue %(queue)r") % {"run": run_id, "queue": queue}
        )
    meta = json.loads(head[b"spec"])
    finished_at = head.get(b"finished_at")
    return BulkRun(
        id=run_id,
        filter=BulkFilter.from_dict(meta["filter"]),
        by=meta["by"],
        reason=meta["reason"],
        user_id=meta.get("user_id"),
        created=int(meta["created"]),
        started=[int(n) for n in meta["started"]],
        matched=int(meta["matched"]),
        state=head[b"state"].decode(),
        done=sum(int(done or 0) for done, _ in counts),
        skipped=sum(int(skipped or 0) for _, skipped in counts),
        finished_at=None if finished_at is None else int(finished_at),
    )


def recent_runs(queue: str, limit: int = 20) -> list[BulkRun]:
    """The queue's runs, newest first (those started in the last ``KEEP_SECONDS``)."""
    ledger = get_ledger(queue)
    head = ledger.shards[0]
    with ledger.translate_errors():
        ids = head.redis.zrevrange(bulk_runs_key(head.namespace, head.queue), 0, limit - 1)
    out = []
    for raw in ids:
        try:
            out.append(load_run(queue, raw.decode()))
        except BulkRefused:
            continue  # expired meanwhile
    return out


def step_run(
    queue: str,
    run_id: str,
    *,
    seconds: float = 2.0,
    page: int = 500,
    hold_ms: int = _HOLD_MS,
    take_over: bool = False,
    progress: Callable[[BulkRun], None] | None = None,
) -> BulkRun:
    """Run pages of ``run_id`` until it ends or ``seconds`` are spent; return it as it stands.

    ``BulkBusy`` when another stepper holds it (``take_over``: take it all the same, for a
    stepper known dead: one still alive is refused at its next page, so two never act at
    once). ``progress`` is called after each page.
    """
    run = load_run(queue, run_id)
    if run.finished:
        return run
    ledger = get_ledger(queue)
    token = _hold(ledger, run_id, hold_ms, take_over)
    deadline = time.monotonic() + seconds
    segments = run.filter.segments()
    paged = False
    try:
        for index, shard in enumerate(ledger.shards):
            with shard.translate_errors():
                seg, score, last = shard.redis.hmget(
                    bulk.run_key(shard, run_id), "seg", "score", "id"
                )
            position = bulk.Position(int(seg or 0), (score or b"").decode(), (last or b"").decode())
            while position.segment < len(segments):
                # At least one page a call, however short its time: every call moves on.
                if paged and time.monotonic() >= deadline:
                    return load_run(queue, run_id)
                paged = True
                try:
                    position = _page(shard, run, token, segments, position, index, page)
                except bulk.RunLost:
                    raise BulkBusy(_busy(run_id)) from None
                _renew(ledger, run_id, token, hold_ms)
                if progress is not None:
                    progress(load_run(queue, run_id))
        return _finish(ledger, load_run(queue, run_id))
    finally:
        _renew(ledger, run_id, token, None)


def _page(
    shard: Any,
    run: BulkRun,
    token: str,
    segments: list[bulk.Segment],
    position: bulk.Position,
    index: int,
    page: int,
) -> bulk.Position:
    spec = run.filter
    cancelling = spec.action == "cancel"
    found = bulk.read_page(
        shard,
        run.id,
        token,
        segments[position.segment],
        limit=page,
        started=run.started[index],
        task=spec.task,
        raw=cancelling,
    )
    after = (
        bulk.Position(position.segment, found.score, found.last)
        if found.more
        else bulk.Position(position.segment + 1)
    )
    if not cancelling:
        bulk.act_page(shard, run.id, token, spec.action, after, found.matches)
        return after
    done = skipped = 0
    for request_id, raw in found.matches:
        # The one cancel path (fenced effects first), only if still the bytes matched.
        outcome = cancel_record(
            spec.queue,
            request_id,
            by=run.by,
            reason=run.reason,
            database=effects_database(),
            # operations.version_of: the version cancel_record compares.
            version=hashlib.sha256(raw).hexdigest()[:32],
        )
        if outcome.cancelled:
            done += 1
        else:
            skipped += 1
    bulk.move(shard, run.id, token, after, done, skipped)
    return after


def _busy(run_id: str) -> str:
    return gettext(
        "bulk run %(run)s is running elsewhere; try again in a few seconds (or take it over "
        "if that stepper has died)"
    ) % {"run": run_id}


def _hold(ledger: AnyLedger, run_id: str, hold_ms: int, take_over: bool = False) -> str:
    """Take the run for this stepper (``BulkBusy`` while another one holds it)."""
    head = ledger.shards[0]
    key = bulk.run_key(head, run_id)
    token = uuid.uuid4().hex
    now = head.server_time_ms()
    with ledger.translate_errors(), head.redis.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(key)
            held = int(pipe.hget(key, "hold") or 0)
            if held > now and not take_over:
                raise BulkBusy(_busy(run_id))
            pipe.multi()
            pipe.hset(key, mapping={"token": token, "hold": now + hold_ms})
            pipe.execute()
        except redis_py.WatchError:
            raise BulkBusy(_busy(run_id)) from None
        for shard in ledger.shards[1:]:
            shard.redis.hset(bulk.run_key(shard, run_id), "token", token)
    return token


def _renew(ledger: AnyLedger, run_id: str, token: str, hold_ms: int | None) -> None:
    """Hold the run ``hold_ms`` longer, or let go of it (``None``), if this stepper holds it."""
    head = ledger.shards[0]
    key = bulk.run_key(head, run_id)
    with ledger.translate_errors():
        if head.redis.hget(key, "token") == token.encode():
            head.redis.hset(key, "hold", 0 if hold_ms is None else head.server_time_ms() + hold_ms)


def _finish(ledger: AnyLedger, run: BulkRun) -> BulkRun:
    """Mark the run finished; the one call that does so writes its audit."""
    head = ledger.shards[0]
    key = bulk.run_key(head, run.id)
    with ledger.translate_errors(), head.redis.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(key)
            if pipe.hget(key, "state") != b"running":
                return load_run(run.filter.queue, run.id)
            pipe.multi()
            pipe.hset(key, mapping={"state": "finished", "finished_at": head.server_time_ms()})
            pipe.execute()
        except redis_py.WatchError:
            return load_run(run.filter.queue, run.id)
    finished = load_run(run.filter.queue, run.id)
    _audit(finished)
    return finished


def _audit(run: BulkRun) -> None:
    text = (
        f"bulk {run.filter.action}: {run.done} done, {run.skipped} skipped (moved on), "
        f"{run.matched} matched at the start; run {run.id} by {run.by}; "
        f"filter {json.dumps(run.filter.as_dict(), sort_keys=True)}"
    )
    logger.info("%s", text)
    if run.user_id is None:
        return
    from django.contrib.admin.models import CHANGE, LogEntry
    from django.contrib.contenttypes.models import ContentType

    content_type = ContentType.objects.get_by_natural_key("django_ledger", "record")
    LogEntry.objects.create(
        user_id=run.user_id,
        content_type=content_type,
        object_id=run.filter.queue,
        object_repr=f"{run.filter.queue} (bulk {run.filter.action})"[:200],
        action_flag=CHANGE,
        change_message=text,
    )
