"""Workflows of Django tasks: chains, groups, chords and graphs, held by the ledger.

A Celery user knows the shapes; the signatures are functions here (``sig``, ``si``),
since a Django ``Task`` is Django's own class::

    from django_ledger.tasks.workflows import Workflow, chain, chord, get_workflow, sig, si

    # A chain: each step gets the previous step's return value as its first argument.
    flow = chain(sig(fetch, "https://example.com"), sig(parse), sig(store)).enqueue(id="imp-42")
    # A chord: the callback gets the list of the group's return values, in group order.
    flow = chord([sig(resize, n) for n in ids], sig(collect)).enqueue(id="batch-7")
    # A graph: a step may wait for several parents (their results, in order, come first).
    g = Workflow()
    a = g.add(sig(fetch, 1))
    b = g.add(sig(fetch, 2))
    g.add(sig(merge), after=[a, b])
    g.add(si(notify, "done"), after=[a], on_failure="continue")  # runs even if a fails
    flow = g.enqueue(id="merge-9")

    flow.id, flow.created                 # the workflow id; False for a repeat
    state = get_workflow("merge-9")       # from any process: steps, states, results
    state.finished, state.step("2").state, state.step("2").return_value

``enqueue(id=...)`` is one admission (one script call); the same id again builds
nothing (``created`` False); another workflow under a used id raises
``WorkflowConflict``. Inside ``transaction.atomic()`` the whole workflow is one outbox
row, delivered when the transaction commits and never when it rolls back. All steps run
in one queue (one Redis Cluster hash slot). ``docs/workflows.md`` is the guide: the
failure rules (``on_failure="cancel"``, the default, or ``"continue"``), retries,
``cancel_workflow``, and what the size of a workflow costs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..core.flows import (
    FlowStep,
    admit_workflow,
    check_workflow,
    read_workflow,
    step_id,
)
from ..core.flows import cancel_workflow as cancel_flow
from ..core.results import AdmissionStatus
from ..core.sharded import AnyLedger
from ..outbox.models import OutboxKind
from ..outbox.workflow_rows import row_id, row_of
from ..queues import queues
from .backend import LedgerBackend
from .calls import _backend
from .compat import DEFAULT_TASK_BACKEND_ALIAS, InvalidTask, Task, TaskException, task_backends
from .exceptions import QueueFull
from .plans import request
from .resolve import random_id
from .staged import stage_calls
from .workflow_state import STEP_STATES, WorkflowState, WorkflowStep, state_of

__all__ = [
    "STEP_STATES",
    "Chain",
    "Chord",
    "Group",
    "Signature",
    "StepCancelled",
    "StepReleaseFailed",
    "Workflow",
    "WorkflowConflict",
    "WorkflowDoesNotExist",
    "WorkflowResult",
    "WorkflowState",
    "WorkflowStep",
    "cancel_workflow",
    "chain",
    "chord",
    "get_workflow",
    "group",
    "si",
    "sig",
]

_ARGS = '{"args":['
_T = TypeVar("_T")


class StepCancelled(Exception):
    """Recorded for a step a failed parent (or ``cancel_workflow``) cancelled: never raised."""


class StepReleaseFailed(Exception):
    """Recorded for a step that could not be released: a parent's result was purged, or its
    parents' results pass ``MAX_STEP_INPUT_BYTES`` (docs/workflows.md). Never raised."""


class WorkflowConflict(TaskException):
    """An enqueue under a workflow id the queue holds for another workflow (or a step id)."""

    def __init__(self, workflow_id: str, queue: str, reason: str | None) -> None:
        self.workflow_id, self.queue, self.reason = workflow_id, queue, reason
        super().__init__(
            f"workflow id {workflow_id!r} is taken on queue {queue!r} ({reason}): a repeat "
            "must build the same workflow"
        )


class WorkflowDoesNotExist(LookupError):
    """No queue the backend reads holds a workflow of this id (never, or purged)."""


# -- the shapes ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Signature:
    """One call of a task, not enqueued yet: ``sig(task, *args, **kwargs)``.

    ``immutable`` (``si``): its parents' results are not passed to it. ``name``: its step
    name (default: its position); ``on_failure``: ``"cancel"`` or ``"continue"``.
    """

    task: Task[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    immutable: bool = False
    name: str | None = None
    on_failure: str = "cancel"

    def set(self, *, name: str | None = None, on_failure: str | None = None) -> Signature:
        """A copy with a step name and/or a failure rule."""
        changes: dict[str, Any] = {"name": name, "on_failure": on_failure}
        return replace(self, **{key: value for key, value in changes.items() if value is not None})

    def enqueue(self, id: str | None = None, queue: str | None = None) -> WorkflowResult:
        return Chain((self,)).enqueue(id=id, queue=queue)


def sig(task: Task[..., Any], /, *args: Any, **kwargs: Any) -> Signature:
    """A step that calls ``task(*parent_results, *args, **kwargs)`` (Celery's ``.s()``)."""
    return Signature(task, args, kwargs)


def si(task: Task[..., Any], /, *args: Any, **kwargs: Any) -> Signature:
    """A step that calls ``task(*args, **kwargs)``, its parents' results not passed (``.si()``)."""
    return Signature(task, args, kwargs, immutable=True)


Node = Any  # Signature | Chain | Group | Chord


class _Shape:
    """What chain, group and chord share: compile to steps, enqueue."""

    def planned(self) -> list[_Planned]:
        out: list[_Planned] = []
        _compile(self, [], "one", out)
        return out

    def enqueue(self, id: str | None = None, queue: str | None = None) -> WorkflowResult:
        """Admit the whole workflow once under ``id`` (a new one if none); see the module."""
        return _enqueue(self.planned(), id, queue)


@dataclass(frozen=True)
class Chain(_Shape):
    """Steps one after the other; each gets the previous one's result (a group's: a list)."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Group(_Shape):
    """Steps side by side; what follows a group gets the list of their results, in order."""

    items: tuple[Node, ...]


@dataclass(frozen=True)
class Chord(_Shape):
    """A group, then a callback that gets the list of the group's results, in order."""

    header: Group
    body: Node


def chain(*items: Node) -> Chain:
    return Chain(tuple(items))


def group(*items: Node | Iterable[Node]) -> Group:
    """``group(a, b)`` or ``group([a, b])`` / ``group(gen)``."""
    if len(items) == 1 and not isinstance(items[0], Signature | _Shape):
        return Group(tuple(items[0]))
    return Group(tuple(items))


def chord(header: Group | Iterable[Node], body: Node) -> Chord:
    return Chord(header if isinstance(header, Group) else Group(tuple(header)), body)


@dataclass
class _Planned:
    name: str
    call: Signature
    parents: tuple[str, ...]
    inputs: str  # "none", "spread", "list"; "empty": a list of no results


def _compile(
    node: Node, parents: list[str], kind: str, out: list[_Planned]
) -> tuple[list[str], str]:
    """Add ``node``'s steps after ``parents``; return its exits and how they pass on."""
    if isinstance(node, Signature):
        name = node.name if node.name is not None else str(len(out))
        if node.immutable:
            inputs = "none"
        elif kind == "list":
            inputs = "list" if parents else "empty"
        else:
            inputs = "spread" if parents else "none"
        out.append(_Planned(name, node, tuple(parents), inputs))
        return [name], "one"
    if isinstance(node, Chain):
        for item in node.items:
            parents, kind = _compile(item, parents, kind, out)
        return parents, kind
    if isinstance(node, Group):
        exits: list[str] = []
        for item in node.items:
            exits += _compile(item, parents, kind, out)[0]
        return exits, "list"
    if isinstance(node, Chord):
        return _compile(Chain((node.header, node.body)), parents, kind, out)
    raise TypeError(f"a workflow is made of sig()/si() calls, chain, group and chord, not {node!r}")


class Workflow:
    """A graph of steps: ``add`` each after the steps it waits for, then ``enqueue``."""

    def __init__(self) -> None:
        self._steps: list[_Planned] = []

    def add(
        self,
        call: Signature,
        *,
        after: Sequence[str] = (),
        name: str | None = None,
        on_failure: str | None = None,
        results: str = "spread",
    ) -> str:
        """Add a step; return its name. ``results``: ``"spread"`` (the parents' results
        as its first arguments, in ``after`` order) or ``"list"`` (one list of them)."""
        if not isinstance(call, Signature):
            raise TypeError(f"add takes a sig() or si() call, not {call!r}")
        if results not in ("spread", "list"):
            raise ValueError('results must be "spread" or "list"')
        call = call.set(name=name, on_failure=on_failure)
        step_name = call.name if call.name is not None else str(len(self._steps))
        parents = tuple(after)
        inputs = "none" if call.immutable or not parents else results
        self._steps.append(_Planned(step_name, call, parents, inputs))
        return step_name

    def planned(self) -> list[_Planned]:
        return list(self._steps)

    def enqueue(self, id: str | None = None, queue: str | None = None) -> WorkflowResult:
        return _enqueue(self.planned(), id, queue)


# -- enqueue --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkflowResult:
    """The handle ``enqueue`` returns: the workflow's id and queue, and its state on demand."""

    id: str
    queue: str
    backend: str
    #: Step name -> the step's task id (``get_result`` reads each one).
    task_ids: dict[str, str]
    #: False when this id held the same workflow already (nothing was built).
    created: bool
    #: True while it waits in the outbox for the caller's transaction to commit.
    staged: bool = False

    def status(self) -> WorkflowState:
        """Read the workflow's state now (any process can: ``get_workflow``)."""
        return get_workflow(self.id, queue=self.queue, backend=self.backend)


def _steps(
    planned: list[_Planned], workflow_id: str, queue: str | None
) -> tuple[LedgerBackend, str, list[FlowStep]]:
    if not planned:
        raise ValueError("a workflow needs at least one step")
    backend = _backend(planned[0].call.task, workflow=True)
    names = {step.call.task.queue_name for step in planned}
    if queue is None:
        if len(names) > 1:
            raise InvalidTask(
                f"the steps' tasks name several queues ({', '.join(sorted(names))}); a "
                "workflow runs in one: pass enqueue(queue=...)"
            )
        queue = planned[0].call.task.queue_name
    steps: list[FlowStep] = []
    # Many steps share a task: its checks and plan are made once per task object.
    prepared: dict[int, tuple[Task[..., Any], Task[..., Any], Any]] = {}
    for step in planned:
        task = step.call.task
        known = prepared.get(id(task))
        if known is not None and known[0] is step.call.task:
            _, task, plan = known
        else:
            if _backend(task) is not backend:
                raise InvalidTask("every step of a workflow must use the same task backend")
            if task.run_after is not None:
                raise InvalidTask(
                    f"{task.module_path}: a workflow's step runs when released, not run_after"
                )
            if task.queue_name != queue:
                task = task.using(queue_name=queue)
            plan = backend._plan(task)
            prepared[id(step.call.task)] = (step.call.task, task, plan)
        args = list(step.call.args)
        if step.inputs == "empty":
            args = [[], *args]
        sid = step_id(workflow_id, step.name)
        _, payload = request(plan, task, args, step.call.kwargs, sid, backend.alias, given=True)
        inputs = "none" if step.inputs == "empty" else step.inputs
        head = tail = ""
        if inputs != "none":
            if not payload.startswith(_ARGS):  # pragma: no cover - jobs.py's canonical form
                raise AssertionError("a task payload starts with its args")
            rest = payload[len(_ARGS) :]
            head, tail = _ARGS, rest if rest.startswith("]") else "," + rest
        steps.append(
            FlowStep(
                step.name,
                payload,
                parents=step.parents,
                on_failure=step.call.on_failure,
                inputs=inputs,
                head=head,
                tail=tail,
            )
        )
    return backend, queue, steps


def _enqueue(planned: list[_Planned], workflow_id: str | None, queue: str | None) -> WorkflowResult:
    flow_id = random_id() if workflow_id is None else workflow_id
    if not isinstance(flow_id, str):
        raise TypeError(f"a workflow id is a str, not {type(flow_id).__name__}")
    backend, queue, steps = _steps(planned, flow_id, queue)
    ledger = backend._queue(queue).ledger
    if len(ledger.shards) != 1:
        raise InvalidTask(
            f"queue {queue!r} has {len(ledger.shards)} shards (SHARDS): workflows need a "
            "queue of one shard; enqueue this one into another queue (enqueue(queue=...))"
        )
    task_ids = {step.name: step_id(flow_id, step.name) for step in steps}
    if backend.staging():
        # Refused now, as outside a transaction, not when the relay meets its row.
        check_workflow(ledger, flow_id, steps)
        # One outbox row (or one on_commit admission) carrying the whole workflow.
        requests = [(row_id(flow_id), row_of(flow_id, steps))]
        stage_calls(backend.transactions, backend.alias, queue, requests, kind=OutboxKind.WORKFLOW)
        backend.ran_eagerly([])  # EAGER: the steps run at the commit
        return WorkflowResult(flow_id, queue, backend.alias, task_ids, True, staged=True)
    answer = admit_workflow(ledger, flow_id, steps)
    if answer.status is AdmissionStatus.CONFLICT:
        raise WorkflowConflict(flow_id, queue, answer.reason)
    if answer.status is AdmissionStatus.FULL:
        raise QueueFull(f"queue {queue!r} has no room for the {len(steps):,} steps of {flow_id!r}")
    created = answer.status is AdmissionStatus.ADMITTED
    backend.ran_eagerly([])  # EAGER: the steps run now, each released by the one before
    return WorkflowResult(flow_id, queue, backend.alias, task_ids, created)


def _first(
    workflow_id: str, queue: str | None, backend: str, act: Callable[[AnyLedger, str], _T | None]
) -> _T:
    """``act``'s first answer on the ledgers of ``queue`` (default: every queue ``backend``
    reads) that hold workflows; ``WorkflowDoesNotExist`` if none answers."""
    if queue is not None:
        names = [queue]
    else:
        found = task_backends[backend]
        names = found.lookup_queues() if isinstance(found, LedgerBackend) else queues.names()
    for name in names:
        ledger = queues.get(name).ledger
        if len(ledger.shards) == 1:  # a sharded queue holds no workflows
            answer = act(ledger, workflow_id)
            if answer is not None:
                return answer
    raise WorkflowDoesNotExist(workflow_id)


def get_workflow(
    workflow_id: str, *, queue: str | None = None, backend: str = DEFAULT_TASK_BACKEND_ALIAS
) -> WorkflowState:
    """Read a workflow's steps, states, results and errors from any process.

    ``queue``: where it runs (default: every queue the backend reads, in order).
    ``WorkflowDoesNotExist`` if none holds it.
    """
    return state_of(_first(workflow_id, queue, backend, read_workflow))


def cancel_workflow(
    workflow_id: str, *, queue: str | None = None, backend: str = DEFAULT_TASK_BACKEND_ALIAS
) -> int:
    """Cancel every step not yet started; return how many. ``WorkflowDoesNotExist`` if unknown.

    Steps already running finish; what waits on them stays cancelled.
    """
    return _first(workflow_id, queue, backend, cancel_flow)
