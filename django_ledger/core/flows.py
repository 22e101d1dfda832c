"""Workflows: steps of one queue that wait for their parents, held by the ledger.

A workflow is a list of ``FlowStep``s admitted together under one workflow id, in one
queue (so in one Redis Cluster hash slot). Each step's request id is
``<workflow id>:<step name>``. A step without parents is admitted PENDING and due; a
step with parents waits: it has no record yet, only entries in the queue's flows hash
(``workflows.lua`` says which), so no claim, index or repair can see it. The settlement that
ends its last parent releases it in the same script call, its payload built from its
parents' results; a parent that fails cancels its ``cancel`` dependants at once.

    steps = [FlowStep("a", payload_a), FlowStep("b", "", parents=("a",), inputs="spread",
             head='{"args":[', tail='],"kwargs":{},"task":"app.b","v":1}')]
    admit_workflow(ledger, "order-42", steps)      # ADMITTED, then DUPLICATE
    read_workflow(ledger, "order-42")              # each step's state and result

Admission is one script call (``flow_admit.lua``) and the release happens inside the
settling script, so no crash leaves a workflow half admitted or a step unreleased. Fused
path only: a ledger on the reference path (``optimized=False``) refuses workflows
(``FusedPathOnly``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import CorruptRecord, FusedPathOnly
from .records import Record, State, decode_record, encode_record, id_problem
from .results import AdmissionStatus
from .sharded import AnyLedger
from .transport import text_of

if TYPE_CHECKING:
    from .runner import Runner

__all__ = [
    "MAX_FLOW_EDGES",
    "MAX_FLOW_STEPS",
    "MAX_STEP_INPUT_BYTES",
    "FlowAdmission",
    "FlowStep",
    "StepStatus",
    "WorkflowStatus",
    "admit_workflow",
    "cancel_workflow",
    "check_workflow",
    "read_workflow",
    "released",
    "reopen_step",
    "retry_step",
    "step_id",
    "workflow_of_step",
]

#: The most steps one workflow may have: all of them live in one hash slot and are
#: admitted by one script call (docs/workflows.md, "Size").
MAX_FLOW_STEPS = 50_000
#: The most parent links (edges) one workflow may have, all steps together: each is kept
#: twice in the flows hash (a step's parents, a parent's dependants) and walked by the
#: settlements that end parents. A chord of 50,000 steps has 50,000.
MAX_FLOW_EDGES = 100_000
#: The most bytes a released step's payload may come to: its own arguments and its
#: parents' results, which its release reads and joins inside the settling script call
#: (workflows.lua's FLOW_MAX_INPUT_BYTES, the same). Past it the step ends FAILED with a
#: ``StepReleaseFailed`` error instead (docs/workflows.md, "Size").
MAX_STEP_INPUT_BYTES = 4 * 1024 * 1024
ON_FAILURE = ("cancel", "continue")
#: How a step's parents' results go into its payload: not at all, as its first arguments
#: in parent order (a chain), or as one list in parent order (a chord's callback).
INPUTS = ("none", "spread", "list")
#: ``json.dumps(value, ensure_ascii=False, separators=(",", ":"))``, its encoder built once.
_compact = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_ADMIT_CODES = {
    1: AdmissionStatus.ADMITTED,
    2: AdmissionStatus.DUPLICATE,
    3: AdmissionStatus.CONFLICT,
    4: AdmissionStatus.FULL,
}


@dataclass(frozen=True)
class FlowStep:
    """One step: its name, payload, parents (names of earlier steps) and rules.

    ``payload`` is the step's payload without inputs (what a cancelled step records, and
    the whole payload when ``inputs`` is ``"none"``); with inputs the released payload is
    ``head + inputs + tail``.
    """

    name: str
    payload: str
    parents: tuple[str, ...] = ()
    on_failure: str = "cancel"
    inputs: str = "none"
    head: str = ""
    tail: str = ""


@dataclass(frozen=True)
class FlowAdmission:
    """What the admission of a workflow answered (``reason``: why not admitted)."""

    workflow_id: str
    status: AdmissionStatus
    reason: str | None = None


@dataclass(frozen=True)
class StepStatus:
    """One step as the ledger holds it now."""

    name: str
    request_id: str
    parents: tuple[str, ...]
    on_failure: str
    #: WAITING, PENDING, CLAIMED, COMPLETED, FAILED, DEAD, CANCELLED, or GONE (purged).
    state: str
    record: Record | None
    result: bytes | None
    #: The parent whose failure cancelled it ("" the operator), when CANCELLED.
    cancelled_by: str | None = None
    #: How many parents it still waits for, when WAITING.
    waiting_for: int | None = None


#: States of a step that has not ended.
LIVE_STATES = ("WAITING", "PENDING", "CLAIMED")


@dataclass(frozen=True)
class WorkflowStatus:
    """A workflow's steps, in the order they were given: all, or the page read.

    ``steps`` are the steps from ``offset`` on that were read; ``total`` and ``counts``
    (state -> how many steps are in it) cover every step of the workflow.
    """

    workflow_id: str
    queue: str
    steps: list[StepStatus] = field(default_factory=list)
    cancelled: bool = False
    total: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    offset: int = 0

    @property
    def finished(self) -> bool:
        """Whether every step has ended (no step waits, is due or runs)."""
        return not any(self.counts.get(state) for state in LIVE_STATES)

    def step(self, name: str) -> StepStatus:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(name)


def step_id(workflow_id: str, name: str) -> str:
    """The request id of a workflow's step: stable, so nothing is admitted twice."""
    return f"{workflow_id}:{name}"


def check_workflow(ledger: AnyLedger, workflow_id: str, steps: Sequence[FlowStep]) -> None:
    """Raise ``ValueError``/``TypeError`` for a workflow ``admit_workflow`` would refuse.

    Nothing is read or written: what a caller that stages a workflow (the outbox) checks
    before its transaction commits, so a bad one fails at enqueue, not at delivery.
    """
    if not ledger.optimized:
        raise FusedPathOnly("workflows")
    if not isinstance(workflow_id, str) or id_problem(workflow_id) is not None:
        raise ValueError(f"workflow id is not usable: {workflow_id!r}")
    if not steps:
        raise ValueError("a workflow needs at least one step")
    if len(steps) > MAX_FLOW_STEPS:
        raise ValueError(f"a workflow holds at most {MAX_FLOW_STEPS:,} steps, got {len(steps):,}")
    seen: set[str] = set()
    edges = 0
    for step in steps:
        if not isinstance(step, FlowStep):
            raise TypeError(f"steps must be FlowStep, got {type(step).__name__}")
        edges += len(step.parents)
        if edges > MAX_FLOW_EDGES:
            raise ValueError(
                f"a workflow holds at most {MAX_FLOW_EDGES:,} parent links (edges), all its "
                f"steps together; step {step.name!r} passes it"
            )
        problem = id_problem(step_id(workflow_id, step.name)) if isinstance(step.name, str) else ""
        if not step.name or problem is not None:
            raise ValueError(f"step name is not usable: {step.name!r}")
        if step.name in seen:
            raise ValueError(f"step name {step.name!r} is given twice")
        for parent in step.parents:
            if parent not in seen:
                raise ValueError(f"step {step.name!r}: parent {parent!r} is not an earlier step")
        if len(set(step.parents)) != len(step.parents):
            raise ValueError(f"step {step.name!r} names a parent twice")
        if step.on_failure not in ON_FAILURE:
            raise ValueError(f"step {step.name!r}: on_failure must be one of {ON_FAILURE}")
        if step.inputs not in INPUTS:
            raise ValueError(f"step {step.name!r}: inputs must be one of {INPUTS}")
        if step.inputs != "none" and not step.parents:
            raise ValueError(f"step {step.name!r} takes its parents' results but has none")
        for text in (step.payload, step.head, step.tail):
            if not isinstance(text, str):
                raise TypeError(f"step {step.name!r}: payload, head and tail must be str")
            size = len(text) if text.isascii() else len(text.encode("utf-8"))
            if size > ledger.max_payload_bytes:
                raise ValueError(f"step {step.name!r}: its payload is over max_payload_bytes")
        seen.add(step.name)


def _manifest(workflow_id: str, steps: Sequence[FlowStep]) -> str:
    digest = hashlib.sha256()
    for step in steps:
        for text in (step.payload, step.head, step.tail):
            digest.update(text.encode("utf-8") + b"\0")
    document = {
        "v": 1,
        "id": workflow_id,
        "steps": [[s.name, list(s.parents), s.on_failure, s.inputs] for s in steps],
        "digest": digest.hexdigest(),
    }
    return _compact(document)


def _entries(workflow_id: str, steps: Sequence[FlowStep]) -> list[tuple[str, str, str, str, int]]:
    """Per step: id, payload ('' if it waits), spec, dependants ('' none), parents."""
    dependants: dict[str, list[list[str]]] = {step.name: [] for step in steps}
    for step in steps:
        for parent in step.parents:
            dependants[parent].append([step_id(workflow_id, step.name), step.on_failure])
    entries = []
    root_spec = _compact({"f": workflow_id})
    for step in steps:
        sid = step_id(workflow_id, step.name)
        if step.parents:
            spec = _compact(
                {
                    "f": workflow_id,
                    "p": [step_id(workflow_id, parent) for parent in step.parents],
                    "o": step.on_failure,
                    "m": step.inputs,
                    "h": step.head,
                    "t": step.tail,
                    "x": step.payload,
                }
            )
        else:
            spec = root_spec  # the same for every root: encoded once
        deps = dependants[step.name]
        entries.append(
            (
                sid,
                "" if step.parents else step.payload,
                spec,
                _compact(deps) if deps else "",
                len(step.parents),
            )
        )
    return entries


def admit_workflow(ledger: AnyLedger, workflow_id: str, steps: Sequence[FlowStep]) -> FlowAdmission:
    """Admit a workflow once: ``ADMITTED``; the same again ``DUPLICATE``; else ``CONFLICT``.

    ``FULL`` when the queue's live records and the workflow's steps pass ``max_records``.
    Bad steps raise ``ValueError``/``TypeError`` before anything is written; a ledger on
    the reference path raises ``FusedPathOnly``.
    """
    runner = flow_runner(ledger)
    check_workflow(ledger, workflow_id, steps)
    manifest = _manifest(workflow_id, steps)
    args: list[Any] = [ledger.max_records, workflow_id, manifest]
    for entry in _entries(workflow_id, steps):
        args += entry
    _, code, detail = runner.run(runner.scripts.flow_admit, args)
    return _answer(workflow_id, int(code), detail)


def _answer(workflow_id: str, code: int, detail: bytes | str) -> FlowAdmission:
    reason = None
    if code == 3:
        text = text_of(detail)
        reason = text if text == "workflow_differs" else f"step_exists: {text}"
    elif code == 4:
        reason = "max_records"
    return FlowAdmission(workflow_id, _ADMIT_CODES[code], reason)


def released(runner: Runner, request_id: str) -> None:
    """After a write outside the fused scripts ended ``request_id``: move its dependants on.

    An operator's ``mark_failed`` calls it.
    """
    runner.run(runner.scripts.flow_release, [request_id])


def reopen_step(ledger: AnyLedger, request_id: str) -> int:
    """The steps a failed step's ending cancelled wait again (``retry_step`` without the retry).

    Return how many steps wait again (0 for a record that is no workflow's step).
    """
    runner = flow_runner(ledger)
    return int(runner.run(runner.scripts.flow_reopen, [request_id]))


def retry_step(ledger: AnyLedger, request_id: str, shown: bytes, retried: Record) -> int | None:
    """An operator's retry of an ended record, in one script call (``flow_reopen.lua``).

    Its bytes ``shown`` become ``retried`` (PENDING) by compare-and-set, and, for a
    workflow step, the steps its ending cancelled wait again in the same call, so nothing
    settles in between. Return how many wait again, or ``None`` (nothing written) when the
    record is no longer ``shown``.
    """
    if retried.state is not State.PENDING:
        raise ValueError("a retry puts the record back PENDING")
    runner = flow_runner(ledger)
    args = [request_id, shown, encode_record(retried), str(retried.index_score())]
    reopened = int(runner.run(runner.scripts.flow_reopen, args))
    return None if reopened < 0 else reopened


def cancel_workflow(ledger: AnyLedger, workflow_id: str) -> int | None:
    """Cancel every step not yet started; return how many, ``None`` for an unknown id."""
    runner = flow_runner(ledger)
    _, cancelled = runner.run(runner.scripts.flow_cancel, [workflow_id])
    return None if int(cancelled) < 0 else int(cancelled)


def read_workflow(
    ledger: AnyLedger, workflow_id: str, *, offset: int = 0, limit: int | None = None
) -> WorkflowStatus | None:
    """Read a workflow's steps, states, results and errors; ``None`` if the queue has none.

    Every step's state is read (for ``counts`` and ``finished``); the records, results
    and errors of ``limit`` steps from ``offset`` on (all by default) are returned, so a
    page of a large workflow reads one page of results.
    """
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"offset must be an int of at least 0, got {offset!r}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be None or an int of at least 0, got {limit!r}")
    runner = flow_runner(ledger)
    key, redis = runner.flows_key, runner.redis
    with runner.translate_errors():
        manifest, cancelled = redis.hmget(key, ["m:" + workflow_id, "x:" + workflow_id])
        if manifest is None:
            return None
        steps = json.loads(manifest)["steps"]
        ids = [step_id(workflow_id, step[0]) for step in steps]
        end = len(ids) if limit is None else min(len(ids), offset + limit)
        records: list[bytes | None] = []
        waiting: list[bytes | None] = []
        causes: list[bytes | None] = []
        for start in range(0, len(ids), 1000):
            part = ids[start : start + 1000]
            pipe = redis.pipeline(transaction=False)
            pipe.hmget(runner.keys.records, part)
            pipe.hmget(key, ["n:" + sid for sid in part])
            pipe.hmget(key, ["c:" + sid for sid in part])
            for column, got in zip((records, waiting, causes), pipe.execute(), strict=True):
                column += got
        results: list[bytes | None] = []
        for start in range(offset, end, 1000):
            results += redis.hmget(runner.keys.results, ids[start : min(start + 1000, end)])
    out = WorkflowStatus(
        workflow_id, ledger.queue, cancelled=cancelled is not None, total=len(ids), offset=offset
    )
    for i, (name, parents, on_failure, _) in enumerate(steps):
        sid = ids[i]
        record: Record | None = None
        found, count = causes[i], waiting[i]
        cause = found.decode("utf-8") if found is not None else None
        waits = int(count) if count is not None else None
        raw = records[i]
        if raw is not None:
            try:
                record = decode_record(sid, raw)
                state = record.state.name
            except CorruptRecord:
                state = "CORRUPT"
            if state == "FAILED" and cause is not None:
                state = "CANCELLED"
        else:
            state = "WAITING" if waits is not None else "GONE"
        out.counts[state] = out.counts.get(state, 0) + 1
        if offset <= i < end:
            out.steps.append(
                StepStatus(
                    name,
                    sid,
                    tuple(parents),
                    on_failure,
                    state,
                    record,
                    results[i - offset],
                    cause if state == "CANCELLED" else None,
                    waits if state == "WAITING" else None,
                )
            )
    return out


def workflow_of_step(ledger: AnyLedger, request_id: str) -> str | None:
    """The id of the workflow whose step ``request_id`` is, or ``None`` (one ``HGET``)."""
    runner = getattr(ledger, "runner", None)
    if runner is None:
        return None
    with runner.translate_errors():
        spec = runner.redis.hget(runner.flows_key, "s:" + request_id)
    if spec is None:
        return None
    flow = json.loads(spec).get("f")
    return flow if isinstance(flow, str) else None


def flow_runner(ledger: AnyLedger) -> Runner:
    """The runner of a queue of one shard, where workflows run (``TypeError`` for another)."""
    runner: Runner | None = getattr(ledger, "runner", None)
    if runner is None:
        raise TypeError("workflows run on a queue of one shard (SHARDS 1): this one is sharded")
    return runner
