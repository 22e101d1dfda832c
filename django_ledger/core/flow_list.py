"""A queue's workflows, a page at a time: each one's state, steps done, start and end.

Workflows have no index of their own: each is a manifest field ``m:<id>`` of the queue's
flows hash (``workflows.lua``). A page is read with ``HSCAN ... MATCH m:*`` from a cursor,
so no call reads the whole hash, and a page's next cursor resumes where it stopped (the
order is the hash's, not by time; a workflow admitted or gone while one pages may show or
not, as with every ``SCAN``). Each workflow listed then costs one pipelined read of its
steps' records (in parts of 1,000), what ``read_workflow`` reads for its counts.

    page = list_workflows(ledger, cursor=0, limit=20)
    page.workflows, page.cursor          # cursor 0: the last page
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .errors import CorruptRecord
from .flows import flow_runner, step_id
from .records import decode_record

if TYPE_CHECKING:
    from .runner import Runner
    from .sharded import AnyLedger

__all__ = ["WORKFLOW_STATES", "WorkflowPage", "WorkflowSummary", "list_workflows"]

#: What a workflow's state may be: steps still waiting, due or running; every step
#: completed; ended with a step not completed; cancelled by an operator.
WORKFLOW_STATES = ("RUNNING", "COMPLETED", "FAILED", "CANCELLED")
#: The hash's buckets one ``HSCAN`` visits (its ``COUNT``).
SCAN_COUNT = 50
#: The most ``HSCAN`` calls one page makes before it answers with what it found.
MAX_SCANS = 20
#: The most workflows one page lists.
MAX_LIMIT = 100
_ENDED = ("COMPLETED", "FAILED", "DEAD", "GONE", "CORRUPT")
_PART = 1000


@dataclass(frozen=True)
class WorkflowSummary:
    """One workflow as a list shows it (times in epoch ms, ``None`` when unknown)."""

    workflow_id: str
    state: str
    done: int
    total: int
    started_at: int | None
    ended_at: int | None


@dataclass(frozen=True)
class WorkflowPage:
    """The workflows of one page, and the cursor of the next (``0``: none)."""

    workflows: list[WorkflowSummary] = field(default_factory=list)
    cursor: int = 0
    #: Workflows the scan met that the state filter left out.
    skipped: int = 0


def list_workflows(
    ledger: AnyLedger, cursor: int = 0, *, limit: int = 20, state: str | None = None
) -> WorkflowPage:
    """Read one page of the queue's workflows from ``cursor`` (``0``: the start).

    Stops once ``limit`` workflows (of ``state``, when given) are found or after
    ``MAX_SCANS`` scan calls; a page may list a few more than ``limit`` (the last scan
    call's whole answer, so that its cursor loses none), or fewer with a next cursor.
    """
    if isinstance(cursor, bool) or not isinstance(cursor, int) or cursor < 0:
        raise ValueError(f"cursor must be an int of at least 0, got {cursor!r}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an int from 1 to {MAX_LIMIT}, got {limit!r}")
    if state is not None and state not in WORKFLOW_STATES:
        raise ValueError(f"state must be one of {WORKFLOW_STATES}, got {state!r}")
    runner = flow_runner(ledger)
    found: list[WorkflowSummary] = []
    skipped = 0
    with runner.translate_errors():
        for _ in range(MAX_SCANS):
            cursor, fields = runner.redis.hscan(
                runner.flows_key, cursor, match="m:*", count=SCAN_COUNT
            )
            for name, manifest in sorted(fields.items()):
                summary = _summary(runner, name[2:].decode("utf-8", "replace"), manifest)
                if state is None or summary.state == state:
                    found.append(summary)
                else:
                    skipped += 1
            if cursor == 0 or len(found) >= limit:
                break
    return WorkflowPage(found, int(cursor), skipped)


def _summary(runner: Runner, workflow_id: str, manifest: bytes) -> WorkflowSummary:
    steps = json.loads(manifest)["steps"]
    ids = [step_id(workflow_id, step[0]) for step in steps]
    pipe = runner.redis.pipeline(transaction=False)
    pipe.hexists(runner.flows_key, "x:" + workflow_id)
    for start in range(0, len(ids), _PART):
        part = ids[start : start + _PART]
        pipe.hmget(runner.keys.records, part)
        pipe.hmget(runner.flows_key, ["n:" + sid for sid in part])
    got = pipe.execute()
    cancelled = bool(got[0])
    records = [raw for reply in got[1::2] for raw in reply]
    waiting = [count for reply in got[2::2] for count in reply]
    done, completed = 0, 0
    started: int | None = None
    ended: int | None = None
    for sid, raw, waits in zip(ids, records, waiting, strict=True):
        if raw is None:
            state = "WAITING" if waits is not None else "GONE"
        else:
            try:
                record = decode_record(sid, raw)
            except CorruptRecord:
                state = "CORRUPT"
            else:
                state = record.state.name
                first = record.created_at
                started = first if started is None else min(started, first)
                if record.state.terminal:
                    ended = record.updated_at if ended is None else max(ended, record.updated_at)
        if state in _ENDED:
            done += 1
            completed += state == "COMPLETED"
    if cancelled:
        summary_state = "CANCELLED"
    elif done < len(ids):
        summary_state = "RUNNING"
    elif completed == len(ids):
        summary_state = "COMPLETED"
    else:
        summary_state = "FAILED"
    return WorkflowSummary(
        workflow_id,
        summary_state,
        done,
        len(ids),
        started,
        ended if done == len(ids) else None,
    )
