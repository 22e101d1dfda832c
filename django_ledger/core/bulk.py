"""Bulk actions over a filter, a page at a time (``lua/scripts/bulk.lua``): the core's part.

A run reads one state's index of one shard from the position it keeps in Redis (the
run's hash on that shard: a segment number, the last score and id it looked at), a
bounded page at a time. A page's matches carry the SHA-1 of their bytes; the action on
them is a second call that changes each record only if it still holds those bytes (a
compare-and-set: a record that moved on between the two is skipped and counted), and
moves the position and the counts in the same call, so a run that dies resumes where
its last page left it and never acts twice. A record updated at or after the run
started has moved on since it matched and is left: the run's own writes (a retried
record that fails again) are never matched a second time.

Retry, fail and purge are written by the script; cancel is ``cancelling.cancel`` on each
match (its fence and result document), its page only moving the position. The fused
path only (``FusedPathOnly``), like every extra of the job system.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import LedgerError
from .layout import bulk_run_key
from .ledger_base import LedgerBase
from .records import State
from .transport import text_of

__all__ = [
    "ACTIONS",
    "APPLIES",
    "MAX_PAGE",
    "Page",
    "Position",
    "RunLost",
    "Segment",
    "act_page",
    "count_matches",
    "move",
    "read_page",
    "run_key",
]

#: The actions a bulk run takes, and the states each applies to, in the order a run reads
#: them: the records out of attempts first, so a run paused early has taken those.
APPLIES: dict[str, tuple[State, ...]] = {
    "retry": (State.DEAD, State.FAILED, State.COMPLETED),
    "fail": (State.PENDING,),
    "purge": (State.DEAD, State.FAILED, State.COMPLETED),
    "cancel": (State.PENDING, State.CLAIMED),
}
ACTIONS = tuple(APPLIES)
#: Most entries one page looks at: the script's time is bounded by it.
MAX_PAGE = 1000
#: The queue key (``QueueKeys``' field, Lua's ``KEYS.<name>``) of each state's index.
_INDEX = {
    State.PENDING: "ready",
    State.CLAIMED: "leases",
    State.COMPLETED: "completed",
    State.FAILED: "failed",
    State.DEAD: "dead",
}


class RunLost(LedgerError):
    """Another stepper holds the run now (this one's hold ran out): nothing was written."""


@dataclass(frozen=True)
class Segment:
    """One state's index, between two scores (inclusive; ``None``: unbounded)."""

    state: State
    low: int | None = None
    high: int | None = None

    def args(self) -> list[Any]:
        return [
            _INDEX[self.state],
            self.state.letter.decode(),
            "-inf" if self.low is None else self.low,
            "+inf" if self.high is None else self.high,
        ]


@dataclass(frozen=True)
class Position:
    """Where a run's reading stands on a shard: a segment, the last score and id seen."""

    segment: int = 0
    score: str = ""
    last: str = ""


@dataclass(frozen=True)
class Page:
    """What one read found: entries looked at, whether the segment goes on, the matches.

    Each match is ``(request id, SHA-1 hex of its bytes)``, or its bytes for a cancel.
    """

    looked: int
    more: bool
    score: str
    last: str
    matches: list[tuple[str, bytes]]


def run_key(shard: LedgerBase, run_id: str) -> str:
    """The hash of run ``run_id`` on ``shard`` (under the shard's own hash tag)."""
    return bulk_run_key(shard.namespace, shard.queue, run_id)


def _run(shard: LedgerBase, run_id: str, args: list[Any]) -> Any:
    """Run one mode of ``bulk.lua``; ``RunLost`` when the run's token is no longer held."""
    shard.fused_only("bulk actions")
    runner = shard.runner
    reply = runner.run(runner.scripts.bulk, args, (run_key(shard, run_id),))
    if reply == [-1]:
        raise RunLost(f"bulk run {run_id} is held by another stepper now")
    return reply


def _filter_args(segment: Segment, limit: int, started: int, task: str, raw: bool) -> list[Any]:
    if not 1 <= limit <= MAX_PAGE:
        raise ValueError(f"a page looks at 1 to {MAX_PAGE} entries, not {limit}")
    return [*segment.args(), limit, started, task, "raw" if raw else "sha1"]


def read_page(
    shard: LedgerBase,
    run_id: str,
    token: str,
    segment: Segment,
    *,
    limit: int,
    started: int,
    task: str = "",
    raw: bool = False,
) -> Page:
    """Read the next page of ``segment`` after the run's position (``RunLost`` if not held)."""
    args = ["page", token, *_filter_args(segment, limit, started, task, raw)]
    reply = _run(shard, run_id, args)
    looked, score, last, more = reply[:4]
    flat = reply[4:]
    matches = [(flat[i].decode(), flat[i + 1]) for i in range(0, len(flat), 2)]
    return Page(int(looked), more in (b"1", "1"), text_of(score), text_of(last), matches)


def act_page(
    shard: LedgerBase,
    run_id: str,
    token: str,
    action: str,
    after: Position,
    matches: list[tuple[str, bytes]],
) -> tuple[int, int]:
    """Act on a page's matches and move the run to ``after``: ``(done, skipped)``."""
    if action not in ("retry", "fail", "purge"):
        raise ValueError(f"the script acts by retry, fail or purge, not {action!r}")
    args: list[Any] = ["act", token, action, after.segment, after.score, after.last]
    for request_id, digest in matches:
        args += (request_id, digest)
    reply = _run(shard, run_id, args)
    return int(reply[0]), int(reply[1])


def move(
    shard: LedgerBase, run_id: str, token: str, after: Position, done: int = 0, skipped: int = 0
) -> None:
    """Move the run to ``after`` on ``shard``, counting a cancel page's ``done`` and ``skipped``."""
    args = ["move", token, "", after.segment, after.score, after.last, done, skipped]
    _run(shard, run_id, args)


def count_matches(
    shard: LedgerBase, segment: Segment, *, started: int, task: str = "", limit: int = MAX_PAGE
) -> int:
    """Count what ``segment`` holds that matches (a preview: one call per ``limit`` entries).

    Without a task to match, the index's own count (one call); with one, each record's
    task is read in Redis, ``limit`` entries a call.
    """
    if not task:
        name, _, low, high = segment.args()
        index = getattr(shard.runner.keys, name)
        with shard.translate_errors():
            return int(shard.redis.zcount(index, low, high))
    total, start = 0, ""
    while True:
        args = ["count", "", *_filter_args(segment, limit, started, task, False), start]
        looked, matched, after, more = _run(shard, "preview", args)
        total += int(matched)
        if more not in (b"1", "1") or not int(looked):
            return total
        start = str(int(after))
